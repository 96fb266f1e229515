//go:build !bbolt && !sqlite && !zombiezen

package main

// Built without a candidate: the baseline for binary size.
func init() { candidate = "none" }

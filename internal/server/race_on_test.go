//go:build race

package server

// raceEnabled says the test binary runs under the race detector, which
// makes sync.Pool drop items at random: allocation counts of code that
// reuses through a pool mean something only without it.
const raceEnabled = true

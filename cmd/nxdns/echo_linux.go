package main

import "golang.org/x/sys/unix"

// echoOff turns the terminal fd's echo off until restore is called. It is
// done before a prompt is shown: term.ReadPassword turns echo off only
// once it starts reading, so keys typed the instant the prompt appears
// (a paste, a fast typist) would be echoed in between.
func echoOff(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

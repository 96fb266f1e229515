package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/nxdns/nxdns/internal/web"
)

// cmdHashPassword reads a password and prints the bcrypt hash
// web.password_file holds (docs/design.md#web-auth). On a terminal it
// prompts twice on stderr without echo (a typo would otherwise lock the
// dashboard); piped, it reads the first line of stdin, so scripts keep
// working. Never an argument: that would put the password in the shell
// history and in ps.
func cmdHashPassword(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "nxdns hash-password takes no arguments: it prompts for the password, or reads it on standard input\n")
		return exitUsage
	}
	var password string
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p, err := promptTwice(int(f.Fd()), stderr)
		if err != nil {
			fmt.Fprintf(stderr, "nxdns hash-password: %v\n", err)
			return exitProblems
		}
		password = p
	} else {
		line, err := bufio.NewReader(io.LimitReader(stdin, 1024)).ReadString('\n')
		if err != nil && err != io.EOF {
			fmt.Fprintf(stderr, "nxdns hash-password: %v\n", err)
			return exitProblems
		}
		password = strings.TrimRight(line, "\r\n")
	}
	hash, err := web.HashPassword([]byte(password))
	if err != nil {
		fmt.Fprintf(stderr, "nxdns hash-password: %v\n", err)
		return exitProblems
	}
	fmt.Fprintln(stdout, hash)
	return exitOK
}

// promptTwice reads the password twice from the terminal fd without echo,
// echo off before the first prompt is shown (echoOff).
func promptTwice(fd int, prompt io.Writer) (string, error) {
	restore, err := echoOff(fd)
	if err != nil {
		return "", err
	}
	defer restore()
	fmt.Fprint(prompt, "Dashboard password: ")
	first, err := term.ReadPassword(fd)
	fmt.Fprintln(prompt)
	if err != nil {
		return "", err
	}
	fmt.Fprint(prompt, "Again: ")
	second, err := term.ReadPassword(fd)
	fmt.Fprintln(prompt)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(first, second) {
		return "", fmt.Errorf("the two passwords differ; nothing was printed")
	}
	return string(first), nil
}

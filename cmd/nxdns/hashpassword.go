package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/nxdns/nxdns/internal/web"
)

// cmdHashPassword reads a password from the first line of stdin and prints
// the bcrypt hash web.password_file holds (docs/design.md#web-auth). Reading stdin, not an
// argument, keeps the password out of the shell history and of ps.
func cmdHashPassword(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "nxdns hash-password takes no arguments: it reads the password on standard input\n")
		return exitUsage
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, 1024)).ReadString('\n')
	if err != nil && err != io.EOF {
		fmt.Fprintf(stderr, "nxdns hash-password: %v\n", err)
		return exitProblems
	}
	password := strings.TrimRight(line, "\r\n")
	hash, err := web.HashPassword([]byte(password))
	if err != nil {
		fmt.Fprintf(stderr, "nxdns hash-password: %v\n", err)
		return exitProblems
	}
	fmt.Fprintln(stdout, hash)
	return exitOK
}

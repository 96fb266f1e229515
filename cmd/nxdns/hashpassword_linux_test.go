package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"
)

// openPTY returns a pseudo-terminal pair: the master (what a terminal
// emulator holds) and the slave (what the shell's stdin is).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// On a terminal, hash-password prompts (on stderr) twice and the password
// is not echoed back to the terminal; the hash it prints verifies it.
func TestHashPassword_promptsWithoutEchoOnATerminal(t *testing.T) {
	master, slave := openPTY(t)
	const password = "correct horse"
	cmd := exec.Command(binary, "hash-password")
	cmd.Stdin = slave
	var out strings.Builder
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	prompts := bufio.NewReader(stderr)
	// Type only once the prompt is there: echo is off by then, as a
	// person at a keyboard would see it.
	for _, prompt := range []string{"Dashboard password: ", "Again: "} {
		got := ""
		for !strings.HasSuffix(got, prompt) {
			b, err := prompts.ReadByte()
			if err != nil {
				t.Fatalf("waiting for %q: read %q, %v", prompt, got, err)
			}
			got += string(b)
		}
		if _, err := master.WriteString(password + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	rest, _ := bufio.NewReader(prompts).ReadString(0)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hash-password: %v (stderr %q)", err, rest)
	}
	if bcrypt.CompareHashAndPassword([]byte(strings.TrimSpace(out.String())), []byte(password)) != nil {
		t.Fatalf("%q does not verify the password typed", out.String())
	}
	// Whatever the terminal shows was written before hash-password read
	// the lines: a non-blocking read of the master gets all of it.
	fd := int(master.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := unix.Read(fd, buf)
	if strings.Contains(string(buf[:max(n, 0)]), password) {
		t.Errorf("the password was echoed to the terminal: %q", buf[:n])
	}
}

// Two different passwords on a terminal print nothing and say why.
func TestHashPassword_refusesTwoDifferentPasswordsOnATerminal(t *testing.T) {
	master, slave := openPTY(t)
	cmd := exec.Command(binary, "hash-password")
	cmd.Stdin = slave
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Typed ahead: the terminal's line discipline holds the lines until
	// they are read (echo may show them; this test is about the check).
	if _, err := master.WriteString("first password\nsecond password\n"); err != nil {
		t.Fatal(err)
	}
	err := cmd.Run()
	if cmd.ProcessState.ExitCode() != exitProblems || out.Len() != 0 || !strings.Contains(errb.String(), "differ") {
		t.Fatalf("exit %v, stdout %q, stderr %q: want exit %d, nothing printed, and why", err, out.String(), errb.String(), exitProblems)
	}
}

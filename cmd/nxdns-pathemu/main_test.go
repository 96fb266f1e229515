package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestServe_badFlagsExit2(t *testing.T) {
	for _, args := range [][]string{{}, {"-to"}, {"-to", "127.0.0.1:1", "extra"}, {"-bogus"}} {
		if code := serve(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	var stderr strings.Builder
	if code := serve(context.Background(), []string{"-to", "127.0.0.1:1", "-loss", "2"}, io.Discard, &stderr); code != 1 {
		t.Errorf("loss 2: exit %d, want 1 (%s)", code, stderr.String())
	}
}

// The printed address relays to the target; cancelling ends the relay and
// exits 0.
func TestServe_printsTheAddressAndRelays(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- serve(ctx, []string{"-to", l.Addr().String(), "-rtt", "10ms"}, pw, io.Discard) }()
	addr, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	c, err := net.DialTimeout("tcp", strings.TrimSpace(addr), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if err != nil || line != "hello\n" {
		t.Errorf("through the relay: %q, %v; want the target's greeting", line, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after cancel, want 0", code)
	}
	pw.Close()
}

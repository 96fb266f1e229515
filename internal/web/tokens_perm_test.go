package web

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tokensHelperDir, set in the environment, makes the test binary the
// helper of TestTokens_unreadableFileFixedByChmodIsReadAgain: it judges
// each token read from stdin with a table on that directory and prints
// the result.
const tokensHelperDir = "NXDNS_TOKENS_HELPER_DIR"

func TestTokensHelper(t *testing.T) {
	dir := os.Getenv(tokensHelperDir)
	if dir == "" {
		t.Skip("the helper of TestTokens_unreadableFileFixedByChmodIsReadAgain")
	}
	tok := NewTokens()
	tok.Configure(dir, false)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		_, result := tok.check(in.Text(), time.Now())
		fmt.Println(result)
	}
}

// A tokens file the service cannot open (made by `sudo nxdns token add`
// as root, mode 0600, for a service running as its own user) refuses
// every token; the operator's fix is chmod or chown, which changes
// neither the file's size, its modification time nor its inode. The
// table reads it again then: the token is let in. The reader is this test
// binary without the capabilities that let root read any file (setpriv),
// so the permission bits apply to it as to a service user.
func TestTokens_unreadableFileFixedByChmodIsReadAgain(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	dir := t.TempDir()
	tok, err := AddToken(dir, "ha", ScopeRead, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, TokensFile)
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all",
		os.Args[0], "-test.run=^TestTokensHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), tokensHelperDir+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewScanner(stdout)
	judge := func() string {
		fmt.Fprintln(stdin, tok)
		if !out.Scan() {
			t.Fatalf("the helper stopped: %v", out.Err())
		}
		return strings.TrimSpace(out.Text())
	}
	switch got := judge(); got {
	case TokenUnreadable:
	case TokenOK:
		t.Skip("the helper still reads a mode-0 file: setpriv could not drop its capabilities here")
	default:
		t.Fatalf("a token with the file unreadable: %q, want %q", got, TokenUnreadable)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := judge(); got != TokenOK {
		t.Fatalf("a token once chmod made the file readable: %q, want %q", got, TokenOK)
	}
}

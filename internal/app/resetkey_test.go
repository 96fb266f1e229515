package app

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nxdns/nxdns/internal/server"
)

// The App hands filter.state_dir to the server: with a QUIC listener the
// stateless-reset secret is created there (mode 0600), and the next start
// reads the same one, which is what lets it reset the connections of the
// process before it (docs/server.md "Stateless resets after a restart").
func TestQUICResetKey_keptInTheStateDirAcrossStarts(t *testing.T) {
	r := newRig(t)
	cfg, _ := r.tlsConfig(t, loopbackAddr(t), loopbackAddr(t), "quic")
	cfg.TLS.DoQListen = []string{loopbackAddr(t)}
	cfg.Filter.StateDir = t.TempDir()
	path := filepath.Join(cfg.Filter.StateDir, server.QUICResetKeyFile)

	a, err := Start(cfg, Options{Logger: r.log})
	if err != nil {
		t.Fatal(err)
	}
	shutdown(t, a)
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no secret after a start with doq_listen and state_dir: %v", err)
	}
	if st, _ := os.Stat(path); len(first) != 32 || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %d bytes, mode %v; want 32, 0600", path, len(first), st.Mode().Perm())
	}
	r.start(t, cfg)
	if again, _ := os.ReadFile(path); !bytes.Equal(again, first) {
		t.Error("the second start replaced the secret")
	}
}

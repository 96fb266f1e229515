package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// netnsEnv marks the re-run child that InNetns started.
const netnsEnv = "NXDNS_TEST_IN_NETNS"

// InNetns reports whether the test runs in a network namespace of its own.
// If not, it re-runs just this test under `unshare -rn` and reports false:
// the caller returns, and the child's verdict is the test's. It skips where
// unshare(1), ip(8) or user namespaces are missing (the Nix build sandbox,
// some containers): a test that changes interfaces must never run in the
// host's namespace.
func InNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == "1" {
		return true
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux, iproute2): %v", tool, err)
		}
	}
	if out, err := exec.Command("unshare", "-rn", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace here: %v %s", err, out)
	}
	cmd := exec.Command("unshare", "-rn", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a network namespace: %v\n%s", err, out)
	}
	return false
}

// IP runs ip(8) with args, ending the test if it fails. Call it only after
// InNetns reported true.
func IP(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

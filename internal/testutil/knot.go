package testutil

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
)

// KnotZone is one zone a test's knotd serves.
type KnotZone struct {
	Name    string // fully qualified, e.g. "example."
	Records string // zone-file body, relative to $ORIGIN Name, $TTL 300
	Sign    bool   // knotd signs it (ECDSA P-256, one CSK)
	NSEC3   bool   // with NSEC3 (no salt, no extra iterations: RFC 9276) instead of NSEC
	// BogusDS puts in the parent a DS that matches no key of the zone
	// (its own digest with the last octet changed) instead of its own: a
	// validator finds the zone bogus (DNSKEY missing).
	BogusDS bool
}

// Knot is a running knotd (Debian package knot) serving signed and unsigned
// zones on 127.0.0.1, the authoritative end of a DNSSEC test hierarchy.
type Knot struct {
	Addr netip.AddrPort
	// DS are each signed zone's DS records (digest SHA-256), in
	// presentation form: a validator's trust anchor, and already in the
	// parent zone when the parent is one of the zones and signed.
	DS map[string][]string
}

const knotConf = `server:
    rundir: "{{dir}}"
    listen: 127.0.0.1@{{port}}
database:
    storage: "{{dir}}/db"
log:
  - target: stderr
    any: info
policy:
  - id: nsec
    manual: on
    algorithm: ecdsap256sha256
  - id: nsec3
    manual: on
    algorithm: ecdsap256sha256
    nsec3: on
    nsec3-iterations: 0
    nsec3-salt-length: 0
template:
  - id: default
    storage: "{{dir}}"
    zonefile-sync: -1
    journal-content: none
zone:
{{zones}}`

// StartKnot generates each signed zone's key with keymgr, puts every signed
// child's DS into its parent zone when the parent is served and signed, starts
// knotd and returns once every zone answers its SOA (signed zones with an
// RRSIG). It skips the test when knotd or keymgr is not installed.
func StartKnot(t testing.TB, zones []KnotZone) *Knot {
	t.Helper()
	knotd := lookProgram(t, "knotd", "knot")
	keymgr := lookProgram(t, "keymgr", "knot")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	for _, z := range zones {
		fmt.Fprintf(&conf, "  - domain: %s\n    file: %s.zone\n", z.Name, fileName(z.Name))
		if z.Sign {
			policy := "nsec"
			if z.NSEC3 {
				policy = "nsec3"
			}
			fmt.Fprintf(&conf, "    dnssec-signing: on\n    dnssec-policy: %s\n", policy)
		}
	}
	confText := func(port uint16) string {
		return strings.NewReplacer("{{dir}}", dir, "{{port}}", fmt.Sprint(port), "{{zones}}", conf.String()).Replace(knotConf)
	}
	confFile := filepath.Join(dir, "knot.conf")
	// keymgr reads the key database's place from the configuration; the
	// port is irrelevant to it.
	if err := os.WriteFile(confFile, []byte(confText(53)), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &Knot{DS: map[string][]string{}}
	for _, z := range zones {
		if !z.Sign {
			continue
		}
		if out, err := exec.Command(keymgr, "-c", confFile, z.Name, "generate", "algorithm=ecdsap256sha256", "ksk=yes", "zsk=yes").CombinedOutput(); err != nil {
			t.Fatalf("keymgr generate %s: %v\n%s", z.Name, err, out)
		}
		out, err := exec.Command(keymgr, "-c", confFile, z.Name, "ds").CombinedOutput()
		if err != nil {
			t.Fatalf("keymgr ds %s: %v\n%s", z.Name, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) == 6 && f[1] == "DS" && f[4] == "2" {
				k.DS[z.Name] = append(k.DS[z.Name], line)
			}
		}
		if len(k.DS[z.Name]) == 0 {
			t.Fatalf("keymgr ds %s gave no SHA-256 DS:\n%s", z.Name, out)
		}
	}
	for _, z := range zones {
		body := fmt.Sprintf("$ORIGIN %s\n$TTL 300\n%s\n", z.Name, z.Records)
		for _, child := range zones {
			if z.Sign && child.Name != z.Name && parentZone(zones, child.Name) == z.Name {
				for _, ds := range k.DS[child.Name] {
					if child.BogusDS {
						ds = otherDigest(ds)
					}
					body += ds + "\n"
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fileName(z.Name)+".zone"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for range portAttempts {
		port := FreePort(t)
		if err := os.WriteFile(confFile, []byte(confText(port)), 0o644); err != nil {
			t.Fatal(err)
		}
		if startProgram(t, "knotd", knotd, []string{"-c", confFile}, "server started") == nil {
			continue
		}
		k.Addr = loopbackPort(port)
		for _, z := range zones {
			WaitFor(t, "knotd to serve "+z.Name, 10*time.Second, func() bool { return k.serves(z) })
		}
		return k
	}
	t.Fatalf("knotd did not start on any of %d free ports", portAttempts)
	return nil
}

// serves reports whether knotd answers z's SOA authoritatively, signed when
// z is.
func (k *Knot) serves(z KnotZone) bool {
	q := new(dns.Msg).SetQuestion(z.Name, dns.TypeSOA)
	q.SetEdns0(1232, true)
	r, err := dns.Exchange(q, k.Addr.String())
	if err != nil || r.Rcode != dns.RcodeSuccess || !r.Authoritative {
		return false
	}
	for _, rr := range r.Answer {
		if _, ok := rr.(*dns.RRSIG); ok || !z.Sign {
			return true
		}
	}
	return false
}

// otherDigest is a DS in presentation form with its digest's last octet
// changed, so it matches no key.
func otherDigest(ds string) string {
	last := "FF"
	if strings.HasSuffix(strings.ToUpper(ds), "FF") {
		last = "00"
	}
	return ds[:len(ds)-2] + last
}

// parentZone is the zone of zones that name is the closest proper subdomain
// of, "" for none.
func parentZone(zones []KnotZone, name string) string {
	best := ""
	for _, z := range zones {
		if z.Name != name && dns.IsSubDomain(z.Name, name) && len(z.Name) > len(best) {
			best = z.Name
		}
	}
	return best
}

func fileName(zone string) string {
	if zone == "." {
		return "root"
	}
	return strings.TrimSuffix(zone, ".")
}

// StartUnboundWith runs unbound with a configuration the test writes: conf
// is an unbound.conf (UnboundServerBase and more) in which {{dir}} is a directory holding cert.pem and
// key.pem (a chain for name from ca) and {{port}} a free loopback port, for
// whatever the configuration listens on there. It returns that port once
// unbound serves. It skips the test when unbound is not installed.
func StartUnboundWith(t testing.TB, ca *certs.CA, name, conf string) netip.AddrPort {
	t.Helper()
	bin := lookProgram(t, "unbound", "unbound")
	dir := t.TempDir()
	writeServerTLS(t, ca, dir, name)
	file := filepath.Join(dir, "unbound.conf")
	for range portAttempts {
		port := FreePort(t)
		text := strings.NewReplacer("{{dir}}", dir, "{{port}}", fmt.Sprint(port)).Replace(conf)
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if check, err := exec.LookPath("unbound-checkconf"); err == nil {
			if out, err := exec.Command(check, file).CombinedOutput(); err != nil {
				t.Fatalf("unbound-checkconf: %v\n%s\n%s", err, out, text)
			}
		}
		if startProgram(t, "unbound", bin, []string{"-d", "-c", file}, "start of service") != nil {
			return loopbackPort(port)
		}
	}
	t.Fatalf("unbound did not start on any of %d free ports", portAttempts)
	return netip.AddrPort{}
}

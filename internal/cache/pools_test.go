package cache

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestCacheFile_leavesGroupPoolsOut: the cache file rebuilds each key from
// its answer's question alone, so a group pool's entry saved there would
// come back as the main pool's. It is not saved (docs/cache.md).
func TestCacheFile_leavesGroupPoolsOut(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache")
	c := New(Options{Size: 100, MaxTTL: time.Hour, StaleMaxAge: time.Hour, File: file})
	st, set := c.state()
	{
		pool := "kids"
		q := new(dns.Msg).SetQuestion("video.example.", dns.TypeA)
		m := new(dns.Msg).SetReply(q)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "video.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)}}
		k := keyOf(q)
		k.pool = pool
		st.put(k, prepare(m, k, set.lim, time.Now(), "tls://192.0.2.53:853", "pool"))
		c.changes.Add(1)
	}
	if x := c.Explain("video.example.", dns.TypeA); len(x) != 1 || x[0].Pool != "kids" {
		t.Fatalf("before saving: %+v, want the kids pool's entry", x)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r, _ := reopen(t, file, time.Hour)
	x := r.Explain("video.example.", dns.TypeA)
	if len(x) != 0 {
		t.Errorf("loaded %+v: the group pool's answer came back as the main pool's", x)
	}
}

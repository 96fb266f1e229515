package cache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
)

// filled is a cache with one entry per name, saved to file and closed.
func filled(t testing.TB, file string, names ...string) {
	t.Helper()
	c := New(Options{Size: 100, MaxTTL: time.Hour, StaleMaxAge: time.Hour, File: file})
	st, set := c.state()
	for _, n := range names {
		q := new(dns.Msg).SetQuestion(n, dns.TypeA)
		m := new(dns.Msg).SetReply(q)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)}}
		e := prepare(m, keyOf(q), set.lim, time.Now(), "tls://192.0.2.53:853", "pool")
		st.put(keyOf(q), e)
		c.changes.Add(1)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// reopen loads file into a new cache and returns it with its warnings.
func reopen(t *testing.T, file string, maxTTL time.Duration) (*Cache, []observer.LoggedEntry) {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	c := New(Options{Size: 100, MaxTTL: maxTTL, StaleMaxAge: time.Hour, File: file, Logger: zap.New(core)})
	t.Cleanup(func() { c.saver.stop() })
	return c, logs.All()
}

func TestCacheFile_roundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache")
	filled(t, file, "a.example.", "b.example.")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v, mode %v; want 0600", err, fi.Mode())
	}
	c, warns := reopen(t, file, time.Hour)
	if len(warns) != 0 || c.Snapshot().Entries != 2 {
		t.Fatalf("entries %d, warnings %v; want 2 and none", c.Snapshot().Entries, warns)
	}
	x := c.Explain("a.example.", dns.TypeA)
	if len(x) != 1 || x[0].State != "fresh" || x[0].Origin != "tls://192.0.2.53:853" || x[0].TTLLeftS < 290 {
		t.Errorf("loaded entry %+v: want fresh, its origin and absolute expiry kept", x)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".nxdns-cache-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestCacheFile_badFilesIgnoredWithOneWarning(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good")
	filled(t, good, "a.example.", "b.example.")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flip := append([]byte(nil), data...)
	flip[len(flip)/2] ^= 0xFF
	otherVersion := append([]byte(nil), data...)
	otherVersion[len(fileMagic)+1]++
	// A count past a 32-bit int under a checksum that matches: sha256 is
	// no seal, anyone can write one.
	hugeCount := append([]byte(nil), data...)
	binary.BigEndian.PutUint32(hugeCount[len(fileMagic)+2+8:], 1<<31)
	body := hugeCount[:len(hugeCount)-sha256.Size]
	sum := sha256.Sum256(body)
	copy(hugeCount[len(body):], sum[:])
	cases := map[string][]byte{
		"truncated":     data[:len(data)-7],
		"damaged":       flip,
		"foreign":       []byte("{\"not\": \"a cache\"}\n"),
		"empty":         {},
		"other version": otherVersion,
		"huge count":    hugeCount,
	}
	// why is how a warning begins where the case is about one check: the
	// huge count passes the checksum, and the records run out before it.
	why := map[string]string{"huge count": "record 2:"}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cache")
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			c, warns := reopen(t, file, time.Hour)
			if len(warns) != 1 || c.Snapshot().Entries != 0 {
				t.Fatalf("entries %d, warnings %d; want an empty cache and one warning", c.Snapshot().Entries, len(warns))
			}
			if msg := fmt.Sprint(warns[0].ContextMap()["error"]); !strings.HasPrefix(msg, why[name]) {
				t.Errorf("warning %q, want it to begin %q", msg, why[name])
			}
		})
	}
	t.Run("other TTL clamps", func(t *testing.T) {
		c, warns := reopen(t, good, 2*time.Hour)
		if len(warns) != 1 || c.Snapshot().Entries != 0 {
			t.Errorf("entries %d, warnings %d; want an empty cache and one warning", c.Snapshot().Entries, len(warns))
		}
	})
	t.Run("a FIFO does not hang start-up", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(file, 0o600); err != nil {
			t.Skip("no FIFOs here:", err)
		}
		_, warns := reopen(t, file, time.Hour)
		if len(warns) != 1 {
			t.Fatalf("%d warnings, want one", len(warns))
		}
		// The shared reader of configuration-named files (safefile) says why.
		if msg := fmt.Sprint(warns[0].ContextMap()["error"]); !strings.Contains(msg, "not a regular file (a FIFO)") {
			t.Errorf("warning %q, want it to name the FIFO", msg)
		}
	})
	t.Run("missing is the first start", func(t *testing.T) {
		_, warns := reopen(t, filepath.Join(t.TempDir(), "none"), time.Hour)
		if len(warns) != 0 {
			t.Errorf("warnings %v for a missing file", warns)
		}
	})
}

func TestCacheFile_expiredPastStaleAgeNotLoaded(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache")
	filled(t, file, "a.example.")
	core, _ := observer.New(zapcore.WarnLevel)
	later := func() time.Time { return time.Now().Add(300*time.Second + 2*time.Hour) }
	c := New(Options{Size: 100, MaxTTL: time.Hour, StaleMaxAge: time.Hour, File: file, Logger: zap.New(core), Now: later})
	defer c.saver.stop()
	if n := c.Snapshot().Entries; n != 0 {
		t.Errorf("%d entries loaded past their stale age", n)
	}
}

func TestReconfigure_flushesOnlyWhenEntriesWouldBeWrong(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache")
	filled(t, file, "a.example.")
	c, _ := reopen(t, file, time.Hour)
	base := Options{Size: 100, MaxTTL: time.Hour, StaleMaxAge: time.Hour}
	keep := base
	keep.Prefetch, keep.StaleMaxAge = true, 2*time.Hour
	if c.Reconfigure(keep) || c.Snapshot().Entries != 1 {
		t.Fatal("prefetch or stale_max_age changes flushed the cache")
	}
	clamp := keep
	clamp.MinTTL = time.Minute
	if !c.Reconfigure(clamp) || c.Snapshot().Entries != 0 {
		t.Error("a new cache_min_ttl kept entries sized under the old one")
	}
	off := clamp
	off.Size = 0
	c.Reconfigure(off)
	if st, _ := c.state(); st != nil {
		t.Error("cache_size 0 left a store")
	}
}

// FuzzDecode: whatever the cache file holds, decoding never panics, and an
// accepted file yields only entries whose key is their own question.
func FuzzDecode(f *testing.F) {
	file := filepath.Join(f.TempDir(), "cache")
	filled(f, file, "a.example.", "b.example.")
	if data, err := os.ReadFile(file); err == nil {
		f.Add(data)
	}
	f.Add([]byte(fileMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		cur := &current{st: newStore(100, 100<<20), set: settingsOf(Options{MaxTTL: time.Hour, StaleMaxAge: time.Hour})}
		defer cur.st.close()
		if _, err := decode(data, cur, time.Now().UnixNano()); err != nil {
			return
		}
		cur.st.each(func(k key, e *entry) {
			q := e.msg.Question[0]
			if k.name != strings.ToLower(q.Name) || k.qtype != q.Qtype || k.qclass != q.Qclass {
				t.Errorf("key %+v for question %v", k, q)
			}
		})
	})
}

func TestSizeZero_passesEverythingOn(t *testing.T) {
	c := New(Options{Size: 0, MaxTTL: time.Hour})
	defer c.Close()
	s := c.Stage()
	defer s.Close()
	q := new(dns.Msg).SetQuestion("a.example.", dns.TypeA)
	calls := 0
	next := query.HandlerFunc(func(context.Context, *query.Request) (*dns.Msg, error) {
		calls++
		m := new(dns.Msg).SetReply(q)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)}}
		return m, nil
	})
	for range 2 {
		ev := &query.Event{}
		if _, err := s.Answer(context.Background(), &query.Request{Msg: q, Deadline: time.Now().Add(time.Second), Event: ev}, next); err != nil {
			t.Fatal(err)
		}
		if ev.Cache != "" {
			t.Errorf("cache outcome %q with the cache off, want none", ev.Cache)
		}
	}
	if calls != 2 || c.Snapshot().Entries != 0 {
		t.Errorf("route called %d times, %d entries; want 2 and 0", calls, c.Snapshot().Entries)
	}
}

// TestCacheFile_savedWhileRunning: a changed cache reaches its file at the
// next periodic save, without a shutdown (a power cut loses at most one
// interval).
func TestCacheFile_savedWhileRunning(t *testing.T) {
	old := saveInterval
	saveInterval = 10 * time.Millisecond
	t.Cleanup(func() { saveInterval = old })
	file := filepath.Join(t.TempDir(), "cache")
	c := New(Options{Size: 100, MaxTTL: time.Hour, StaleMaxAge: time.Hour, File: file})
	defer c.saver.stop() // no Close: the periodic save alone must write it
	st, set := c.state()
	q := new(dns.Msg).SetQuestion("run.example.", dns.TypeA)
	m := new(dns.Msg).SetReply(q)
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "run.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)}}
	st.put(keyOf(q), prepare(m, keyOf(q), set.lim, time.Now(), "tls://192.0.2.53:853", "pool"))
	c.changes.Add(1)
	testutil.WaitFor(t, "the cache file written while running", 10*time.Second, func() bool {
		_, err := os.Stat(file)
		return err == nil
	})
	if r, warns := reopen(t, file, time.Hour); len(warns) != 0 || len(r.Explain("run.example.", dns.TypeA)) != 1 {
		t.Errorf("the periodically written file: warnings %v, entries %d", warns, r.Snapshot().Entries)
	}
}

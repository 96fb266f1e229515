package cache

import (
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// A flush covers its name and the names below it, only for exchanges begun
// before it, and once the log forgets, every exchange older than it.
func TestFlushLog_coversWhatAFlushReached(t *testing.T) {
	var l flushLog
	before := l.seq()
	l.add("example.com.")
	cases := []struct {
		since uint64
		name  string
		want  bool
	}{
		{before, "example.com.", true},
		{before, "www.example.com.", true},
		{before, "notexample.com.", false},
		{before, "example.org.", false},
		{l.seq(), "example.com.", false}, // begun after the flush
	}
	for _, c := range cases {
		if got := l.covers(c.since, c.name); got != c.want {
			t.Errorf("covers(%d, %q) = %v, want %v", c.since, c.name, got, c.want)
		}
	}
	l.add(".")
	if !l.covers(before+1, "example.org.") {
		t.Error("a flush of everything does not cover example.org.")
	}
	old := l.seq()
	for range maxFlushLog + 1 {
		l.add("other.test.")
	}
	if !l.covers(old, "example.org.") {
		t.Error("an exchange older than the log's memory is not assumed covered")
	}
}

func TestFlushLog_concurrent(t *testing.T) {
	var l flushLog
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				s := l.seq()
				l.add("a.test.")
				if !l.covers(s, "x.a.test.") {
					t.Error("a flush made after seq does not cover a name below it")
					return
				}
			}
		})
	}
	wg.Wait()
	if l.seq() != 800 {
		t.Errorf("seq %d after 800 flushes", l.seq())
	}
}

func TestAnswers_followsTheChainByOwner(t *testing.T) {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cname := rr("a.example. 60 IN CNAME b.example.")
	cases := []struct {
		name  string
		rrs   []dns.RR
		qtype uint16
		want  bool
	}{
		{"the record itself", []dns.RR{rr("a.example. 60 IN A 192.0.2.1")}, dns.TypeA, true},
		{"the chain's end", []dns.RR{cname, rr("b.example. 60 IN A 192.0.2.1")}, dns.TypeA, true},
		{"NODATA behind a CNAME", []dns.RR{cname}, dns.TypeA, false},
		{"the CNAME asked for", []dns.RR{cname}, dns.TypeCNAME, true},
		{"ANY", []dns.RR{cname}, dns.TypeANY, true},
		{"a record of another owner", []dns.RR{rr("c.example. 60 IN A 192.0.2.1")}, dns.TypeA, false},
		{"a DNAME above, its CNAME, nothing at the end", []dns.RR{rr("example. 60 IN DNAME example.net."),
			rr("a.example. 60 IN CNAME a.example.net.")}, dns.TypeDNAME, false},
		{"a loop", []dns.RR{cname, rr("b.example. 60 IN CNAME a.example.")}, dns.TypeA, false},
	}
	for _, c := range cases {
		if got := answers(c.rrs, "a.example.", c.qtype); got != c.want {
			t.Errorf("%s: answers = %v, want %v", c.name, got, c.want)
		}
	}
}

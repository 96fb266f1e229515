package cache

import (
	"strings"
	"sync"
	"sync/atomic"
)

// maxFlushLog is how many flushes the log remembers. An exchange lasts at
// most a query's budget (seconds); more flushes than this within one is an
// operator's script, and then learn assumes the worst.
const maxFlushLog = 64

// flushLog remembers the recent flushes, so that an exchange in flight
// during one does not store an answer asked before it (learn).
//
// Guarantee: covers(since, name) is true when a flush made after since
// (a seq read before the exchange began) removed name or a name above it,
// and also when more than maxFlushLog flushes came after since; it is
// false for a name no flush after since covered while they fit the log.
//
// Every miss reads seq and checks covers, so both are an atomic load and
// nothing more while no flush came: the lock is taken only after one.
type flushLog struct {
	n      atomic.Uint64 // flushes so far; written under mu
	mu     sync.Mutex
	recent []flushed // the last maxFlushLog, oldest first
}

type flushed struct {
	seq  uint64 // this flush's number, 1 for the first
	name string // lower-case, fully qualified; "." for every name
}

// seq is the number of flushes so far.
func (l *flushLog) seq() uint64 { return l.n.Load() }

// add records a flush of name and everything below it.
func (l *flushLog) add(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recent) == maxFlushLog {
		l.recent = append(l.recent[:0], l.recent[1:]...)
	}
	l.recent = append(l.recent, flushed{l.n.Load() + 1, name})
	l.n.Add(1) // after the record: a seq past since has its flush in recent
}

// covers reports whether a flush after since reached qname.
func (l *flushLog) covers(since uint64, qname string) bool {
	if l.n.Load() == since {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n.Load()-since > uint64(len(l.recent)) {
		return true // forgotten: assume it did
	}
	for _, f := range l.recent {
		if f.seq > since && under(qname, f.name) {
			return true
		}
	}
	return false
}

// under reports whether qname is name or below it ("." is above all).
func under(qname, name string) bool {
	return name == "." || qname == name || strings.HasSuffix(qname, "."+name)
}

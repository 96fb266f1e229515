package cache

import (
	"strings"
	"sync"
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
type flushLog struct {
	mu     sync.Mutex
	n      uint64    // flushes so far
	recent []flushed // the last maxFlushLog, oldest first
}

type flushed struct {
	seq  uint64 // this flush's number, 1 for the first
	name string // lower-case, fully qualified; "." for every name
}

// seq is the number of flushes so far.
func (l *flushLog) seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// add records a flush of name and everything below it.
func (l *flushLog) add(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.recent) == maxFlushLog {
		l.recent = append(l.recent[:0], l.recent[1:]...)
	}
	l.recent = append(l.recent, flushed{l.n, name})
}

// covers reports whether a flush after since reached qname.
func (l *flushLog) covers(since uint64, qname string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == since {
		return false
	}
	if l.n-since > uint64(len(l.recent)) {
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

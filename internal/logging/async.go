package logging

import (
	"io"
	"sync/atomic"
	"time"
)

// Bounds of the asynchronous sink.
const (
	// queueLines is how many lines wait for the writer. A query line is
	// about 250 bytes, so a full queue holds about 1 MiB: a second of a
	// household's busiest burst, long enough to ride out journald catching
	// up, small enough for a Raspberry Pi.
	queueLines = 4096
	// syncTimeout bounds Sync (zap's flush at exit): a stalled sink must not
	// keep a stopping process from exiting.
	syncTimeout = time.Second
)

// dropped counts the lines thrown away because the queue was full, process
// wide (there is one stderr): nxdns_log_dropped_total.
var dropped atomic.Uint64

// Dropped is the number of log lines dropped because the sink stalled.
func Dropped() uint64 { return dropped.Load() }

// asyncWriter puts a bounded queue between the loggers and a sink that may
// block (stderr to a busy journald, a full pipe): docs/design.md#log-never-blocks "the query log
// never blocks the query path".
//
// Guarantees: Write never blocks and never fails; a line either reaches the
// sink whole, in the order written, or is dropped and counted in Dropped
// (never half a line). Sync returns once every line written before it has
// reached the sink, or after syncTimeout. One goroutine writes to the sink
// for the life of the process (a logger has no Close in zap), the lines
// queued at that moment in one write; a sink error such as EPIPE (the
// reader went away) drops that write's lines, counted, and the next write
// is tried.
type asyncWriter struct {
	out     io.Writer
	queue   chan item
	dropped *atomic.Uint64 // the package's dropped; a test's own counter
}

// item is a line to write, or a flush marker: closed once every earlier
// line has been written.
type item struct {
	line    []byte
	flushed chan struct{}
}

func newAsyncWriter(out io.Writer, dropped *atomic.Uint64) *asyncWriter {
	w := &asyncWriter{out: out, queue: make(chan item, queueLines), dropped: dropped}
	go w.run() // lives with the process; see the type's comment
	return w
}

// maxBatch bounds the bytes run joins into one write: the lines already
// queued go to the sink together, one system call for many lines at query
// rates. 4096 bytes is PIPE_BUF: a write that size or smaller to a pipe is
// all or nothing (pipe(7)), so a batch, like a single line, never reaches
// a pipe cut in half. A line longer than that is written on its own.
const maxBatch = 4096

func (w *asyncWriter) run() {
	var batch []byte
	lines := 0
	flush := func() {
		if lines == 0 {
			return
		}
		if _, err := w.out.Write(batch); err != nil {
			w.dropped.Add(uint64(lines))
		}
		batch, lines = batch[:0], 0
	}
	for it := range w.queue {
		for {
			if it.flushed != nil {
				flush()
				close(it.flushed)
			} else {
				if len(batch)+len(it.line) > maxBatch {
					flush()
				}
				batch = append(batch, it.line...)
				lines++
			}
			select {
			case next, ok := <-w.queue:
				if ok {
					it = next
					continue
				}
			default:
			}
			break
		}
		flush()
	}
}

// Write queues a copy of p (zap reuses its buffer) or drops it.
func (w *asyncWriter) Write(p []byte) (int, error) {
	select {
	case w.queue <- item{line: append([]byte(nil), p...)}:
	default:
		w.dropped.Add(1)
	}
	return len(p), nil
}

// Sync waits, at most syncTimeout, for the lines queued so far to be written.
func (w *asyncWriter) Sync() error {
	done := make(chan struct{})
	t := time.NewTimer(syncTimeout)
	defer t.Stop()
	select {
	case w.queue <- item{flushed: done}:
	case <-t.C:
		return nil
	}
	select {
	case <-done:
	case <-t.C:
	}
	return nil
}

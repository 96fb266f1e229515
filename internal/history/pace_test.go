package history

import (
	"net"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestPacer_readerRunsDuringLongWorkOnOneProcessor: on one processor, a
// goroutine doing long work that calls step lets a goroutine blocked on a
// socket read run soon after its datagram arrives, not at the runtime's
// next 10 ms preemption. The busy goroutine sends the datagrams itself
// (a write needs no scheduling) and the reader notes when each arrived.
func TestPacer_readerRunsDuringLongWorkOnOneProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	delays := func(step func()) []time.Duration {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		out, err := net.Dial("udp", pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		const sends = 20
		got := make(chan time.Time, sends)
		go func() {
			buf := make([]byte, 16)
			for range sends {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				got <- time.Now()
			}
		}()
		runtime.Gosched() // the reader blocks in its read
		var sent []time.Time
		x := 0
		for len(sent) < sends {
			if len(sent) == 0 || time.Since(sent[len(sent)-1]) > 3*time.Millisecond {
				sent = append(sent, time.Now())
				if _, err := out.Write([]byte("q")); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 1000 { // a row's worth of work
				x += i * i
			}
			step()
		}
		deadline := time.Now().Add(50 * time.Millisecond)
		for time.Now().Before(deadline) { // the last datagrams' readers, still busy
			step()
		}
		var d []time.Duration
		for i := range sends {
			select {
			case at := <-got:
				d = append(d, at.Sub(sent[i]))
			case <-time.After(5 * time.Second):
				t.Fatalf("datagram %d never read", i)
			}
		}
		_ = x
		slices.Sort(d)
		return d
	}
	p := newPacer()
	paced := delays(p.step)
	unpaced := delays(func() {})
	t.Logf("reader's delay, paced: median %v max %v; unpaced: median %v max %v",
		paced[len(paced)/2], paced[len(paced)-1], unpaced[len(unpaced)/2], unpaced[len(unpaced)-1])
	// The shape: paced, half the datagrams are read within a few slices
	// (margin for a loaded machine and -race); unpaced, the runtime's 10 ms
	// preemption is what lets the reader in.
	if med := paced[len(paced)/2]; med > 2*time.Millisecond {
		t.Errorf("paced: median delay %v, want under 2ms (paceSlice %v)", med, paceSlice)
	}
}

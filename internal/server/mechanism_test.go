package server

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

func TestCapacity_neverExceedsMax(t *testing.T) {
	c := capacity{max: 4}
	var held, peak atomicMax
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				if !c.tryAcquire() {
					continue
				}
				peak.observe(held.v.Add(1))
				held.add(-1)
				c.release()
			}
		})
	}
	wg.Wait()
	if p := peak.load(); p > 4 {
		t.Errorf("%d units held at once, max 4", p)
	}
	if c.inUse() != 0 {
		t.Errorf("in use %d after every release, want 0", c.inUse())
	}
	for range 4 {
		if !c.tryAcquire() {
			t.Fatal("tryAcquire failed below max")
		}
	}
	if c.tryAcquire() {
		t.Error("tryAcquire succeeded at max")
	}
	c.release()
	if !c.tryAcquire() {
		t.Error("tryAcquire failed after a release")
	}
}

// Under concurrent queries and repeated swaps, each drained returns only
// after every query that pinned that generation has released it.
func TestGeneration_drainedWaitsForEveryHolder(t *testing.T) {
	s := New(Options{}, &State{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				g := s.acquire()
				select {
				case <-g.done:
					t.Error("acquired a generation already drained")
				default:
				}
				g.release()
			}
		})
	}
	for range 200 {
		s.genMu.RLock()
		old := s.gen
		s.genMu.RUnlock()
		drained := s.Swap(&State{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := drained(ctx); err != nil {
			t.Fatalf("drained: %v", err)
		}
		cancel()
		if n := old.refs.Load(); n != 0 {
			t.Fatalf("drained returned with %d holders", n)
		}
	}
	close(stop)
	wg.Wait()
}

// The wildcard-bind path: the destination address read from a datagram's
// control message is the source the answer leaves from, which a connected
// client socket requires. Exercised on loopback sockets with the option set.
func TestPktinfo_answersFromQueriedAddress(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				t.Skipf("cannot bind %s: %v", addr, err)
			}
			defer pc.Close()
			srv := pc.(*net.UDPConn)
			if err := enablePktinfo(srv); err != nil {
				t.Fatal(err)
			}
			client := dialUDP(t, srv.LocalAddr().String())
			if _, err := client.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			buf, oob := make([]byte, 64), make([]byte, oobSize)
			srv.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, oobn, _, from, err := srv.ReadMsgUDPAddrPort(buf, oob)
			if err != nil {
				t.Fatal(err)
			}
			dst := packetDst(oob[:oobn])
			want := netip.MustParseAddrPort(srv.LocalAddr().String()).Addr()
			if dst != want {
				t.Fatalf("destination %v, want %v", dst, want)
			}
			if _, _, err := srv.WriteMsgUDPAddrPort([]byte("pong"), sourceOOB(dst), from); err != nil {
				t.Fatal(err)
			}
			client.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := client.Read(buf)
			if err != nil || string(buf[:n]) != "pong" {
				t.Errorf("client read %q, %v; want pong", buf[:n], err)
			}
		})
	}
	if sourceOOB(netip.Addr{}) != nil || packetDst(nil).IsValid() {
		t.Error("no address must mean no control message, and none parsed")
	}
}

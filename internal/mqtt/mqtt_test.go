package mqtt

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/testutil"
)

// fakeMessage is a received MQTT message.
type fakeMessage struct {
	topic   string
	payload []byte
}

func (m fakeMessage) Duplicate() bool   { return false }
func (m fakeMessage) Qos() byte         { return 0 }
func (m fakeMessage) Retained() bool    { return false }
func (m fakeMessage) Topic() string     { return m.topic }
func (m fakeMessage) MessageID() uint16 { return 0 }
func (m fakeMessage) Payload() []byte   { return m.payload }
func (m fakeMessage) Ack()              {}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A flood of commands while the action is slow is bounded: the queue holds
// commandQueue, the rest are dropped and counted, none blocks the caller
// (paho's one router goroutine); garbage payloads, long ones and unknown
// switches are counted invalid; the commands that got in are applied in
// order. Messages for a broker that is not there are dropped and counted.
func TestBridge_commandFloodIsBoundedAndGarbageCounted(t *testing.T) {
	release := make(chan struct{})
	var got []bool
	sw := Switch{ID: "group_kids", Name: "Filtering kids", On: func() bool { return true },
		Set: func(on bool) error { <-release; got = append(got, on); return nil }}
	b, err := Start(Options{Broker: "mqtt://" + closedPort(t), Prefix: "nxdns", Discovery: "homeassistant", Publish: time.Hour},
		Deps{Sensors: func() Sensors { return Sensors{} }, Switches: func() []Switch { return []Switch{sw} }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	const flood = 200
	var want []bool // the commands that got in, in the order sent
	for i := range flood {
		dropped := b.Stats().CommandsDropped
		b.onCommand(nil, fakeMessage{"nxdns/switch/group_kids/set", []byte([]string{"OFF", "on"}[i%2])})
		if b.Stats().CommandsDropped == dropped {
			want = append(want, i%2 == 1)
		}
	}
	for _, m := range []fakeMessage{
		{"nxdns/switch/group_kids/set", []byte("\x00garbage")},
		{"nxdns/switch/group_kids/set", []byte(fmt.Sprintf("%0100d", 0))},
		{"nxdns/switch/group_kids/toggle", []byte("ON")},
	} {
		b.onCommand(nil, m)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a flood of %d commands held the caller for %v", flood, took)
	}
	close(release)
	s := b.Stats()
	testutil.WaitFor(t, "the queued commands applied", 5*time.Second, func() bool {
		s = b.Stats()
		return s.CommandsApplied+s.CommandsDropped == flood
	})
	if s.CommandsDropped < flood-commandQueue-1 || s.CommandsInvalid != 3 {
		t.Errorf("dropped %d (want at least %d), invalid %d (want 3)", s.CommandsDropped, flood-commandQueue-1, s.CommandsInvalid)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("applied %v: want %v, the commands that got in, in the order sent", got, want)
	}
	b.enqueue("nxdns/status", []byte("online"))
	testutil.WaitFor(t, "the message for an absent broker dropped", 5*time.Second, func() bool { return b.Stats().Dropped >= 1 })
	if b.Stats().Connected {
		t.Error("connected to a closed port")
	}
}

// Close against a broker that accepts and never answers (a reload that
// changes [mqtt], or SIGTERM, while paho waits for a CONNACK) returns
// within a bound, and paho's goroutines end once its attempt and retry
// wait do (retryInterval + connectTimeout): nothing keeps retrying behind
// a closed bridge.
func TestBridge_closeWhileTheBrokerNeverAnswersLeavesNothingRunning(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	b, err := Start(Options{Broker: "mqtt://" + ln.Addr().String(), Prefix: "nxdns", Discovery: "homeassistant", Publish: time.Hour},
		Deps{Sensors: func() Sensors { return Sensors{} }, Switches: func() []Switch { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	c := <-accepted // paho is now waiting for a CONNACK that never comes
	defer c.Close()
	start := time.Now()
	b.Close()
	if took := time.Since(start); took > connectTimeout+2*time.Second {
		t.Errorf("Close took %v", took)
	}
	ln.Close()
	c.Close()
	testutil.WaitFor(t, "paho's goroutines to end", retryInterval+connectTimeout+5*time.Second, func() bool {
		return goleak.Find(before) == nil
	})
}

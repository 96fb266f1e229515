package mqtt

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/nxdns/nxdns/internal/testutil"
)

// A command is applied when it is sent, never again: a retained OFF left on
// a command topic (a `mosquitto_pub -r`, a misconfigured automation) would
// otherwise pause the group again at every reconnect, whatever the
// dashboard did since (docs/how-to/home-assistant.md). Against Debian's
// mosquitto: the retained OFF is not applied and is counted invalid; a
// live ON sent after it is applied.
func TestBridge_retainedCommandIsNotApplied(t *testing.T) {
	const bin = "/usr/sbin/mosquitto"
	if _, err := os.Stat(bin); err != nil {
		t.Skip("mosquitto is not installed")
	}
	port := testutil.FreePort(t)
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n", port), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	testutil.WaitFor(t, "mosquitto accepting", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	ha := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("test-ha"))
	if tok := ha.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("test client: %v", tok.Error())
	}
	defer ha.Disconnect(0)
	const topic = "nxdns/switch/group_kids/set"
	if tok := ha.Publish(topic, 1, true, "OFF"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("retained OFF: %v", tok.Error())
	}
	var mu sync.Mutex
	var got []bool
	sw := Switch{ID: "group_kids", Name: "Filtering kids", On: func() bool { return true },
		Set: func(on bool) error { mu.Lock(); got = append(got, on); mu.Unlock(); return nil }}
	b, err := Start(Options{Broker: "mqtt://" + addr, Prefix: "nxdns", Discovery: "homeassistant", Publish: time.Hour},
		Deps{Sensors: func() Sensors { return Sensors{} }, Switches: func() []Switch { return []Switch{sw} }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A live ON until one is applied: the broker hands a retained message
	// to a subscription before anything published after it.
	testutil.WaitFor(t, "a live ON applied", 10*time.Second, func() bool {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 0 {
			ha.Publish(topic, 0, false, "ON").WaitTimeout(time.Second)
		}
		return n > 0
	})
	mu.Lock()
	defer mu.Unlock()
	for _, on := range got {
		if !on {
			t.Fatalf("applied %v: the retained OFF was applied", got)
		}
	}
	if s := b.Stats(); s.CommandsInvalid != 1 {
		t.Errorf("invalid %d, want the retained command counted (1)", s.CommandsInvalid)
	}
}

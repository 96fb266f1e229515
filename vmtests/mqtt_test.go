package vmtests

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/nxdns/nxdns/internal/testutil"
)

// Home Assistant over MQTT through the real binary and a real broker
// (Debian's mosquitto on a loopback high port) with a real MQTT client
// subscribing as Home Assistant does (docs/how-to/home-assistant.md).

const mosquittoBin = "/usr/sbin/mosquitto"

// startMosquitto runs a broker of its own on 127.0.0.1:port, config in a
// temporary directory, and returns once it accepts connections.
func startMosquitto(t *testing.T, port uint16) *exec.Cmd {
	t.Helper()
	if _, err := os.Stat(mosquittoBin); err != nil {
		t.Skip("mosquitto is not installed")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type all\n", port), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mosquittoBin, "-c", conf)
	var logs lockedLog
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("mosquitto on port %d:\n%s", port, logs.String())
		}
	})
	testutil.WaitFor(t, "mosquitto accepting", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return cmd
}

// lockedLog collects a process's output.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// haClient is Home Assistant's side: it subscribes to the discovery and
// nxdns's topics and keeps the last payload of each topic.
type haClient struct {
	c      paho.Client
	mu     sync.Mutex
	last   map[string]string
	n      int
	events []string // every payload of nxdns/event/new_device
}

// haClients numbers the test clients: two with one client ID would make
// the broker close the older one, again and again.
var haClients atomic.Int64

func subscribe(t *testing.T, port uint16) *haClient {
	t.Helper()
	h := &haClient{last: map[string]string{}}
	o := paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID(fmt.Sprintf("home-assistant-test-%d", haClients.Add(1))).
		SetConnectTimeout(5 * time.Second)
	h.c = paho.NewClient(o)
	if tok := h.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("test client connect: %v", tok.Error())
	}
	t.Cleanup(func() { h.c.Disconnect(100) })
	tok := h.c.SubscribeMultiple(map[string]byte{"homeassistant/#": 0, "nxdns/#": 0}, func(_ paho.Client, m paho.Message) {
		h.mu.Lock()
		h.last[m.Topic()] = string(m.Payload())
		h.n++
		if m.Topic() == "nxdns/event/new_device" {
			h.events = append(h.events, string(m.Payload()))
		}
		h.mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	return h
}

func (h *haClient) get(topic string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[topic]
}

func (h *haClient) publish(t *testing.T, topic, payload string) {
	t.Helper()
	if tok := h.c.Publish(topic, 0, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// A Home Assistant client sees nxdns's discovery configs (a switch for the
// kids' group, the sensors, a binary sensor for the upstream) and its
// availability; a device's first query is a new-device event; turning the
// switch off unblocks the kids' client (kdig),
// turning it on blocks again; a flood of commands and garbage payloads is
// counted and leaves DNS answering.
func TestMQTT_homeAssistantSeesDiscoveryAndItsSwitchChangesDNS(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Skip("kdig is not installed")
	}
	port := testutil.FreePort(t)
	startMosquitto(t, port)
	ha := subscribe(t, port)
	dir := t.TempDir()
	games := filepath.Join(dir, "games.txt")
	if err := os.WriteFile(games, []byte("||games.example^\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	p := startNxdns(t, ca, settings{extra: fmt.Sprintf(`[filter]
[[filter.lists]]
name = "games"
path = %q
[[filter.groups]]
name = "kids"
clients = ["127.0.0.2"]
lists = ["games"]
[mqtt]
broker = "mqtt://127.0.0.1:%d"
publish_seconds = 5
[history]
flush_seconds = 1
`, games, port)}, up)

	cfgTopic := "homeassistant/switch/nxdns/group_kids/config"
	testutil.WaitFor(t, "the discovery configs and availability", 20*time.Second, func() bool {
		return strings.Contains(ha.get(cfgTopic), `"command_topic":"nxdns/switch/group_kids/set"`) &&
			ha.get("homeassistant/sensor/nxdns/queries_today/config") != "" &&
			ha.get("homeassistant/sensor/nxdns/blocked_today/config") != "" &&
			ha.get("homeassistant/sensor/nxdns/cache_hit_rate/config") != "" &&
			ha.get("homeassistant/sensor/nxdns/clock/config") != "" &&
			ha.get("nxdns/status") == "online" && ha.get("nxdns/switch/group_kids/state") == "ON"
	})
	ha.mu.Lock()
	var binary string
	for topic := range ha.last {
		if strings.HasPrefix(topic, "homeassistant/binary_sensor/nxdns/upstream_") {
			binary = topic
		}
	}
	ha.mu.Unlock()
	if binary == "" || !strings.Contains(ha.get(binary), `"device_class":"connectivity"`) {
		t.Errorf("no upstream binary sensor config (%q)", binary)
	}

	// A device never seen before (its first query from 127.0.0.3) is one
	// new-device event, at the next publish.
	if !strings.Contains(ha.get("homeassistant/event/nxdns/new_device/config"), `"event_types":["new_device"]`) {
		t.Error("no new-device event entity announced")
	}
	p.kdig(t, "127.0.0.3", "news.example", "A")
	testutil.WaitFor(t, "the new-device event for 127.0.0.3", 15*time.Second, func() bool {
		ha.mu.Lock()
		defer ha.mu.Unlock()
		return slices.Contains(ha.events, `{"event_type":"new_device","address":"127.0.0.3"}`)
	})

	blocked := func() bool { return strings.Contains(p.kdig(t, "127.0.0.2", "games.example", "A", "+edns"), "EDE: 15") }
	if !blocked() {
		t.Fatal("the kids' client is not filtered before the switch")
	}
	ha.publish(t, "nxdns/switch/group_kids/set", "OFF")
	testutil.WaitFor(t, "the switch off: state OFF and the kids' client unfiltered", 10*time.Second, func() bool {
		return ha.get("nxdns/switch/group_kids/state") == "OFF" && !blocked()
	})
	// A client in no group (filtered by every list, as there is no
	// default group) stays filtered: the switch is the kids' only.
	if !strings.Contains(p.kdig(t, "127.0.0.1", "games.example", "A", "+edns"), "EDE: 15") {
		t.Error("the kids' switch unfiltered a client outside the group")
	}
	ha.publish(t, "nxdns/switch/group_kids/set", "ON")
	testutil.WaitFor(t, "the switch on again: filtered", 10*time.Second, func() bool {
		return ha.get("nxdns/switch/group_kids/state") == "ON" && blocked()
	})

	// A flood: 500 commands as fast as the client sends, garbage among them.
	for i := range 500 {
		payload := "ON"
		if i%5 == 0 {
			payload = "\x00garbage"
		}
		h := ha.c.Publish("nxdns/switch/group_kids/set", 0, false, payload)
		_ = h
	}
	ha.publish(t, "nxdns/switch/nosuch/set", "OFF")
	// QoS 0 all the way: the client library and the broker may each drop
	// part of a flood sent without waiting, so how many garbage payloads
	// reach nxdns is theirs to decide; that they are counted, and that
	// nothing else changes, is nxdns's.
	testutil.WaitFor(t, "the flood counted", 15*time.Second, func() bool {
		f := p.metrics(t)
		return metric(f, "nxdns_mqtt_commands_total", "result", "invalid") >= 1 &&
			metric(f, "nxdns_mqtt_commands_total", "result", "applied") >= 2
	})
	if !blocked() {
		t.Error("after the flood the kids' client is unfiltered")
	}
	if f := p.metrics(t); metric(f, "nxdns_mqtt_connected") != 1 {
		t.Errorf("nxdns_mqtt_connected %v after the flood", metric(f, "nxdns_mqtt_connected"))
	}
	p.stop(t)
	testutil.WaitFor(t, "availability offline after SIGTERM", 10*time.Second, func() bool { return ha.get("nxdns/status") == "offline" })
}

// A broker that accepts and never answers, and one that answers garbage:
// nxdns starts, answers DNS at once, reports nxdns_mqtt_connected 0, keeps
// retrying without piling up connections, and stops cleanly on SIGTERM.
func TestMQTT_silentOrGarbageBrokerNeverTouchesDNS(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Skip("kdig is not installed")
	}
	for _, mode := range []string{"silent", "garbage"} {
		t.Run(mode, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			accepted := 0
			var conns []net.Conn
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					accepted++
					conns = append(conns, c)
					mu.Unlock()
					if mode == "garbage" {
						c.Write([]byte("\x20\x02\xff\xffHTTP/1.1 200 OK\r\n\r\n\x00\x01garbage"))
					}
				}
			}()
			t.Cleanup(func() {
				ln.Close()
				mu.Lock()
				for _, c := range conns {
					c.Close()
				}
				mu.Unlock()
			})
			ca := newTestCA(t)
			up := startUpstream(t, ca, "dot://127.0.0.1:0")
			p := startNxdns(t, ca, settings{extra: fmt.Sprintf("[mqtt]\nbroker = \"mqtt://%s\"\n", ln.Addr())}, up)
			testutil.WaitFor(t, "a connection attempt", 15*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return accepted > 0 })
			if out := p.kdig(t, "127.0.0.1", "news.example", "A"); !strings.Contains(out, "status: NOERROR") {
				t.Errorf("DNS with a %s broker:\n%s", mode, out)
			}
			if f := p.metrics(t); metric(f, "nxdns_mqtt_connected") != 0 {
				t.Errorf("nxdns_mqtt_connected %v with a %s broker", metric(f, "nxdns_mqtt_connected"), mode)
			}
			mu.Lock()
			n := accepted
			mu.Unlock()
			if n > 5 {
				t.Errorf("%d connections to the %s broker within seconds: want a retry with backoff", n, mode)
			}
			p.stop(t)
		})
	}
}

// A broker that goes away and comes back (restarted without persistence,
// so every retained config is gone), twice: nxdns counts each lost
// connection, answers DNS while it is away, reconnects with backoff and
// announces its discovery configs and availability again to a fresh Home
// Assistant client.
func TestMQTT_reconnectsAndAnnouncesAgainAfterTheBrokerRestarts(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Skip("kdig is not installed")
	}
	port := testutil.FreePort(t)
	broker := startMosquitto(t, port)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	p := startNxdns(t, ca, settings{extra: fmt.Sprintf("[filter]\n[[filter.groups]]\nname = \"default\"\nclients = []\n[mqtt]\nbroker = \"mqtt://127.0.0.1:%d\"\npublish_seconds = 5\n", port)}, up)
	testutil.WaitFor(t, "connected", 15*time.Second, func() bool { return metric(p.metrics(t), "nxdns_mqtt_connected") == 1 })
	for round := 1; round <= 2; round++ {
		broker.Process.Kill()
		broker.Wait()
		testutil.WaitFor(t, "the lost connection counted", 15*time.Second, func() bool {
			f := p.metrics(t)
			return metric(f, "nxdns_mqtt_connected") == 0 && metric(f, "nxdns_mqtt_connections_lost_total") == float64(round)
		})
		if out := p.kdig(t, "127.0.0.1", "news.example", "A"); !strings.Contains(out, "status: NOERROR") {
			t.Errorf("DNS without the broker:\n%s", out)
		}
		broker = startMosquitto(t, port)
		ha := subscribe(t, port)
		testutil.WaitFor(t, "reconnected and announced again", 30*time.Second, func() bool {
			return ha.get("homeassistant/switch/nxdns/group_default/config") != "" && ha.get("nxdns/status") == "online"
		})
	}
}

// A switch per group and blocked service (docs/how-to/home-assistant.md):
// Home Assistant sees one for each service the kids' group configures and
// one more when the dashboard switches another service on (the count is
// the configured and the switched services, never the whole catalogue);
// turning the TikTok switch off unblocks tiktok.com for the kids' client
// (kdig) and the dashboard's group list shows the same override, on blocks
// it again. The DNSSEC mode sensor says the configured mode.
func TestMQTT_serviceSwitchesChangeDNSAsTheDashboardDoes(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Skip("kdig is not installed")
	}
	port := testutil.FreePort(t)
	startMosquitto(t, port)
	ha := subscribe(t, port)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	p := startNxdns(t, ca, settings{extra: fmt.Sprintf(`[filter]
[[filter.groups]]
name = "kids"
clients = ["127.0.0.2"]
services = ["tiktok", "roblox"]
[mqtt]
broker = "mqtt://127.0.0.1:%d"
publish_seconds = 5
`, port)}, up)
	const tiktok = "nxdns/switch/service_tiktok_kids"
	serviceSwitches := func() []string {
		ha.mu.Lock()
		defer ha.mu.Unlock()
		var out []string
		for topic, payload := range ha.last {
			if strings.HasPrefix(topic, "homeassistant/switch/nxdns/service_") && payload != "" {
				out = append(out, topic)
			}
		}
		slices.Sort(out)
		return out
	}
	testutil.WaitFor(t, "a switch for each configured service, ON", 20*time.Second, func() bool {
		return len(serviceSwitches()) == 2 && ha.get(tiktok+"/state") == "ON" && ha.get("nxdns/switch/service_roblox_kids/state") == "ON" &&
			strings.Contains(ha.get("homeassistant/switch/nxdns/service_tiktok_kids/config"), `"command_topic":"`+tiktok+`/set"`)
	})
	if got := ha.get("homeassistant/sensor/nxdns/dnssec_mode/config"); !strings.Contains(got, `"state_topic":"nxdns/sensor/dnssec_mode/state"`) {
		t.Errorf("DNSSEC mode sensor config %q", got)
	}
	testutil.WaitFor(t, "the DNSSEC mode sensor's state", 10*time.Second, func() bool { return ha.get("nxdns/sensor/dnssec_mode/state") == "off" })

	blocked := func() bool {
		return strings.Contains(p.kdig(t, "127.0.0.2", "www.tiktok.com", "A", "+edns"), "EDE: 15")
	}
	if !blocked() {
		t.Fatal("tiktok.com is not blocked for the kids before the switch")
	}
	ha.publish(t, tiktok+"/set", "OFF")
	testutil.WaitFor(t, "the TikTok switch OFF and tiktok.com answered for the kids", 10*time.Second, func() bool {
		return ha.get(tiktok+"/state") == "OFF" && !blocked()
	})
	resp, err := http.Get("http://" + p.web + "/api/filter/groups")
	if err != nil {
		t.Fatal(err)
	}
	var groups []struct {
		Name      string
		Overrides struct{ Services map[string]bool }
	}
	json.NewDecoder(resp.Body).Decode(&groups)
	resp.Body.Close()
	if len(groups) != 1 || groups[0].Overrides.Services["tiktok"] != false || len(groups[0].Overrides.Services) != 1 {
		t.Errorf("the dashboard's groups after the switch: %+v, want kids with tiktok switched off", groups)
	}
	ha.publish(t, tiktok+"/set", "ON")
	testutil.WaitFor(t, "the TikTok switch ON and tiktok.com blocked again", 10*time.Second, func() bool {
		return ha.get(tiktok+"/state") == "ON" && blocked()
	})
	p.post(t, "/api/filter/groups/switch?group=kids&service=instagram&state=on")
	testutil.WaitFor(t, "a switch for the service the dashboard turned on", 20*time.Second, func() bool {
		return len(serviceSwitches()) == 3 && ha.get("nxdns/switch/service_instagram_kids/state") == "ON"
	})
	if f := p.metrics(t); metric(f, "nxdns_mqtt_commands_total", "result", "applied") != 2 {
		t.Errorf("commands applied %v, want 2", metric(f, "nxdns_mqtt_commands_total", "result", "applied"))
	}
}

// Package mqtt puts nxdns into Home Assistant over MQTT discovery
// (docs/how-to/home-assistant.md): a switch per filter group and per
// group and blocked service, sensors (queries and blocked today, cache hit
// rate, upstream health, clock state, DNSSEC mode), a binary sensor per
// upstream, availability with a last will.
//
// Nothing here is on the query path. The sensors are read from the same
// snapshots /metrics reads, on this package's own goroutines; every message
// goes through one bounded queue to one sender, which drops and counts
// when the broker is slow or gone; commands from the broker go through a
// bounded queue too, so a flood of them is dropped and counted rather than
// queued without end. A broker that never answers costs a goroutine
// waiting, never a DNS answer.
package mqtt

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/zap"
)

// Bounds. Compiled: a household's broker and Home Assistant need a few
// dozen messages a minute.
const (
	// queueLen is the outgoing queue: one publish round of a large house
	// (some 20 groups, MaxServiceSwitches, 8 upstreams, the sensors: about
	// 200 messages with the discovery configs) fits.
	queueLen = 256
	// MaxServiceSwitches bounds the switches per group and blocked
	// service, over all groups (docs/how-to/home-assistant.md): the
	// catalogue has dozens of services, and a switch for each in each
	// group would bury Home Assistant and overflow queueLen.
	MaxServiceSwitches = 64
	// commandQueue is how many commands wait for the worker; a flood past
	// it is dropped and counted.
	commandQueue = 16
	// maxPayload is the longest command payload read ("ON", "OFF").
	maxPayload = 64
	// writeTimeout bounds one publish handed to paho: a broker that stops
	// reading stalls the sender for this long, and the queue drops behind it.
	writeTimeout = 5 * time.Second
	// connectTimeout bounds one connection attempt (TCP, TLS, CONNACK): a
	// broker that accepts and never acks is given up on after it.
	connectTimeout = 10 * time.Second
	// maxBackoff is the longest wait between reconnection attempts; paho
	// doubles the wait from a second up to it.
	maxBackoff = time.Minute
	// retryInterval is the wait between the first connection's attempts
	// (paho's ConnectRetryInterval); a closed bridge's last attempt ends
	// within it and connectTimeout.
	retryInterval = 5 * time.Second
	keepAlive     = 30 * time.Second
)

// Switch is one Home Assistant switch: a group's filtering, or a group's
// blocked service. Each kind is entries in what Deps.Switches returns; the
// command path is the same for all.
type Switch struct {
	ID   string           // topic word, unique among switches: "group_kids"
	Name string           // what Home Assistant shows: "Filtering kids"
	Icon string           // "": mdi:shield-check
	On   func() bool      // the state now
	Set  func(bool) error // the same call the dashboard's action makes
}

// Upstream is one upstream's binary sensor.
type Upstream struct {
	Name string // its redacted URL
	Up   bool   // not in backoff
}

// Sensors are the values published every Options.Publish.
type Sensors struct {
	QueriesToday, BlockedToday int64
	CacheHitRate               float64 // percent of cache lookups answered from it, today
	Healthy, Upstreams         int     // upstreams not in backoff, of all
	Clock                      string  // synchronized, unsynchronized, unknown
	// DNSSEC is dnssec.mode as it applies (off, shadow, enforce, or
	// waiting_for_clock while enforce waits for a trusted clock); "": no
	// sensor.
	DNSSEC         string
	UpstreamStates []Upstream
}

// Device is a client as the new-device event names it.
type Device struct {
	Address string `json:"address"`
	Name    string `json:"name,omitempty"`
}

// maxKnown bounds the devices the bridge remembers as seen; past it the
// set starts again from what the history holds (no event for those).
const maxKnown = 4096

// Deps are what the bridge reads and controls. Functions, because a reload
// replaces the groups and the pool.
type Deps struct {
	Sensors  func() Sensors
	Switches func() []Switch
	// Clients are the clients seen in the last d (the history's); nil: no
	// new-device event. The first call, with a long d, seeds what is known.
	Clients func(d time.Duration) []Device
	Version string
}

// Options configure the connection ([mqtt], internal/config).
type Options struct {
	Broker    string // mqtt://IP:PORT or mqtts://IP:PORT
	Username  string
	Password  string
	TLS       *tls.Config // for mqtts; nil: system roots, the broker's IP as the name
	Prefix    string      // nxdns's topics and the device id
	Discovery string      // Home Assistant's discovery prefix
	Publish   time.Duration
	Logger    *zap.Logger
}

// Stats are the bridge's counters for /metrics.
type Stats struct {
	Connected        bool
	Published        uint64 // messages handed to the broker
	Dropped          uint64 // messages dropped: queue full, not connected, or the write timed out
	ConnectionsLost  uint64
	CommandsApplied  uint64
	CommandsInvalid  uint64 // unknown switch or payload
	CommandsDropped  uint64 // the command queue was full
	CommandsRejected uint64 // the action itself failed
}

type message struct {
	topic     string
	payload   []byte
	transient bool // an event: not retained, so a new subscriber does not see it again
}

type command struct {
	id string
	on bool
}

// Bridge is a running connection to the broker.
type Bridge struct {
	opts   Options
	deps   Deps
	log    *zap.Logger
	client paho.Client

	out  chan message
	cmds chan command
	kick chan bool // true: announce everything again (a new connection)
	stop chan struct{}
	wg   sync.WaitGroup

	connected                                       atomic.Bool
	published, dropped, lost                        atomic.Uint64
	applied, invalid, cmdDropped, rejected          atomic.Uint64
	announced                                       map[string]string // config topic → payload last sent; the publish loop's
	known                                           map[string]bool   // devices seen (new-device event); the publish loop's
	availability, switchBase, sensorBase, upstreams string
	events                                          string
}

// Start connects in the background (paho retries until the broker
// answers) and returns at once.
func Start(opts Options, deps Deps) (*Bridge, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	u, err := url.Parse(opts.Broker)
	if err != nil {
		return nil, fmt.Errorf("mqtt.broker: %w", err)
	}
	scheme := "tcp"
	if u.Scheme == "mqtts" {
		scheme = "ssl"
	}
	b := &Bridge{opts: opts, deps: deps, log: opts.Logger.Named("mqtt"),
		out: make(chan message, queueLen), cmds: make(chan command, commandQueue),
		kick: make(chan bool, 1), stop: make(chan struct{}), announced: map[string]string{},
		availability: opts.Prefix + "/status", switchBase: opts.Prefix + "/switch/",
		sensorBase: opts.Prefix + "/sensor/", upstreams: opts.Prefix + "/upstream/", events: opts.Prefix + "/event/new_device"}
	po := paho.NewClientOptions().
		AddBroker(scheme+"://"+u.Host).
		SetClientID("nxdns-"+opts.Prefix).
		SetUsername(opts.Username).SetPassword(opts.Password).
		SetCleanSession(true).
		SetOrderMatters(true). // commands are handed on in order, on paho's one router goroutine
		SetKeepAlive(keepAlive).SetPingTimeout(10*time.Second).
		SetConnectTimeout(connectTimeout).SetWriteTimeout(writeTimeout).
		SetAutoReconnect(true).SetMaxReconnectInterval(maxBackoff).
		SetConnectRetry(true).SetConnectRetryInterval(retryInterval).
		SetWill(b.availability, "offline", 1, true).
		SetOnConnectHandler(b.onConnect).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			b.connected.Store(false)
			b.lost.Add(1)
			b.log.Warn("MQTT connection lost; reconnecting with backoff", zap.Error(err))
		})
	if scheme == "ssl" {
		cfg := opts.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		po.SetTLSConfig(cfg)
	}
	b.client = paho.NewClient(po)
	b.client.Connect() // with ConnectRetry it keeps trying in the background
	b.wg.Go(b.send)
	b.wg.Go(b.apply)
	b.wg.Go(b.loop)
	return b, nil
}

// onConnect subscribes to the command topics and announces everything
// again (a broker restarted without persistence forgot the retained
// configs). It runs on paho's goroutine: it only queues.
func (b *Bridge) onConnect(c paho.Client) {
	b.connected.Store(true)
	b.log.Info("MQTT connected", zap.String("broker", b.opts.Broker))
	c.Subscribe(b.switchBase+"+/set", 0, b.onCommand)
	select {
	case b.kick <- true:
	default:
		// A kick is pending; make it a full one.
		select {
		case <-b.kick:
		default:
		}
		select {
		case b.kick <- true:
		default:
		}
	}
}

// onCommand reads a switch command; a full queue drops it (a flood), a
// payload other than ON or OFF or an unknown switch is counted invalid. So
// is a retained command: the broker hands it to every new subscription,
// and applying it would repeat a stale OFF at each reconnect, undoing what
// the dashboard did since; a command counts when it is sent.
func (b *Bridge) onCommand(_ paho.Client, m paho.Message) {
	id, ok := strings.CutPrefix(m.Topic(), b.switchBase)
	id, ok2 := strings.CutSuffix(id, "/set")
	p := m.Payload()
	if !ok || !ok2 || len(p) > maxPayload || m.Retained() {
		b.invalid.Add(1)
		return
	}
	var on bool
	switch strings.ToUpper(strings.TrimSpace(string(p))) {
	case "ON":
		on = true
	case "OFF":
	default:
		b.invalid.Add(1)
		return
	}
	select {
	case b.cmds <- command{id: id, on: on}:
	default:
		b.cmdDropped.Add(1)
	}
}

// apply runs the commands, one at a time, through the switches' own Set.
func (b *Bridge) apply() {
	for {
		select {
		case <-b.stop:
			return
		case c := <-b.cmds:
			var sw *Switch
			for _, s := range b.deps.Switches() {
				if s.ID == c.id {
					sw = &s
					break
				}
			}
			if sw == nil {
				b.invalid.Add(1)
				continue
			}
			if err := sw.Set(c.on); err != nil {
				b.rejected.Add(1)
				b.log.Warn("Home Assistant command failed", zap.String("switch", c.id), zap.Error(err))
			} else {
				b.applied.Add(1)
				b.log.Info("Home Assistant command", zap.String("switch", c.id), zap.Bool("on", c.on))
			}
			b.enqueue(b.switchBase+c.id+"/state", onOff(sw.On()))
		}
	}
}

// loop publishes the states every Publish, and the discovery configs when
// they change or a connection is new.
func (b *Bridge) loop() {
	t := time.NewTicker(b.opts.Publish)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case all := <-b.kick:
			if all {
				clear(b.announced)
			}
		case <-t.C:
		}
		if b.connected.Load() {
			b.publishAll()
		}
	}
}

// enqueue queues one retained message; a full queue drops it.
func (b *Bridge) enqueue(topic string, payload []byte) {
	b.queue(message{topic: topic, payload: payload})
}

func (b *Bridge) queue(m message) {
	select {
	case b.out <- m:
	default:
		b.dropped.Add(1)
	}
}

// send hands the queue to the broker, one message at a time.
func (b *Bridge) send() {
	for {
		select {
		case <-b.stop:
			return
		case m := <-b.out:
			if !b.client.IsConnectionOpen() {
				b.dropped.Add(1)
				continue
			}
			tok := b.client.Publish(m.topic, 0, !m.transient, m.payload)
			if !tok.WaitTimeout(writeTimeout) || tok.Error() != nil {
				b.dropped.Add(1)
				continue
			}
			b.published.Add(1)
		}
	}
}

func onOff(on bool) []byte {
	if on {
		return []byte("ON")
	}
	return []byte("OFF")
}

// upstreamID is a stable topic word for an upstream: a hash of its URL,
// so a reordered file keeps each sensor's history in Home Assistant.
func upstreamID(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("upstream_%08x", h.Sum32())
}

// publishAll announces what changed and publishes every state.
func (b *Bridge) publishAll() {
	s := b.deps.Sensors()
	switches := b.deps.Switches()
	want := map[string]string{}
	device := map[string]any{"identifiers": []string{"nxdns_" + b.opts.Prefix}, "name": "nxdns " + b.opts.Prefix,
		"manufacturer": "nxdns", "model": "DNS forwarder", "sw_version": b.deps.Version}
	add := func(component, id string, cfg map[string]any) {
		cfg["unique_id"] = "nxdns_" + b.opts.Prefix + "_" + id
		cfg["object_id"] = "nxdns_" + b.opts.Prefix + "_" + id
		cfg["availability_topic"] = b.availability
		cfg["device"] = device
		j, _ := json.Marshal(cfg)
		want[b.opts.Discovery+"/"+component+"/"+b.opts.Prefix+"/"+id+"/config"] = string(j)
	}
	for _, sw := range switches {
		icon := sw.Icon
		if icon == "" {
			icon = "mdi:shield-check"
		}
		add("switch", sw.ID, map[string]any{"name": sw.Name, "command_topic": b.switchBase + sw.ID + "/set",
			"state_topic": b.switchBase + sw.ID + "/state", "icon": icon})
	}
	for _, x := range []struct{ id, name, unit, class string }{
		{"queries_today", "Queries today", "queries", "total_increasing"},
		{"blocked_today", "Blocked today", "queries", "total_increasing"},
		{"cache_hit_rate", "Cache hit rate", "%", "measurement"},
		{"upstreams_healthy", "Upstreams healthy", "", "measurement"},
		{"clock", "Clock", "", ""},
	} {
		cfg := map[string]any{"name": x.name, "state_topic": b.sensorBase + x.id + "/state"}
		if x.unit != "" {
			cfg["unit_of_measurement"] = x.unit
		}
		if x.class != "" {
			cfg["state_class"] = x.class
		}
		add("sensor", x.id, cfg)
	}
	if s.DNSSEC != "" {
		add("sensor", "dnssec_mode", map[string]any{"name": "DNSSEC mode", "state_topic": b.sensorBase + "dnssec_mode/state", "icon": "mdi:shield-key"})
	}
	if b.deps.Clients != nil {
		add("event", "new_device", map[string]any{"name": "New device", "state_topic": b.events,
			"event_types": []string{"new_device"}, "icon": "mdi:devices"})
	}
	for _, u := range s.UpstreamStates {
		id := upstreamID(u.Name)
		add("binary_sensor", id, map[string]any{"name": "Upstream " + u.Name, "state_topic": b.upstreams + id + "/state",
			"device_class": "connectivity"})
	}
	for topic, payload := range want {
		if b.announced[topic] != payload {
			b.enqueue(topic, []byte(payload))
			b.announced[topic] = payload
		}
	}
	for topic := range b.announced {
		if _, ok := want[topic]; !ok { // a group or upstream gone since: remove its entity
			b.enqueue(topic, nil)
			delete(b.announced, topic)
		}
	}
	b.enqueue(b.availability, []byte("online"))
	for _, sw := range switches {
		b.enqueue(b.switchBase+sw.ID+"/state", onOff(sw.On()))
	}
	for id, v := range map[string]string{
		"queries_today":     fmt.Sprint(s.QueriesToday),
		"blocked_today":     fmt.Sprint(s.BlockedToday),
		"cache_hit_rate":    fmt.Sprintf("%.1f", s.CacheHitRate),
		"upstreams_healthy": fmt.Sprintf("%d", s.Healthy),
		"clock":             s.Clock,
		"dnssec_mode":       s.DNSSEC,
	} {
		if v != "" || id != "dnssec_mode" {
			b.enqueue(b.sensorBase+id+"/state", []byte(v))
		}
	}
	for _, u := range s.UpstreamStates {
		b.enqueue(b.upstreams+upstreamID(u.Name)+"/state", onOff(u.Up))
	}
	b.newDevices()
}

// newDevices sends an event for each client seen for the first time. The
// known set is seeded from the history's whole range on the first round
// (no event for those), so a restart does not announce every device again;
// it is bounded by maxKnown.
func (b *Bridge) newDevices() {
	if b.deps.Clients == nil {
		return
	}
	if b.known == nil || len(b.known) > maxKnown {
		b.known = map[string]bool{}
		for _, d := range b.deps.Clients(366 * 24 * time.Hour) {
			b.known[d.Address] = true
		}
	}
	for _, d := range b.deps.Clients(time.Hour) {
		if b.known[d.Address] {
			continue
		}
		b.known[d.Address] = true
		j, _ := json.Marshal(struct {
			Type string `json:"event_type"`
			Device
		}{"new_device", d})
		b.queue(message{topic: b.events, payload: j, transient: true})
	}
}

// Kick publishes every state now (after a reload, or a dashboard action
// that a switch shows).
func (b *Bridge) Kick() {
	select {
	case b.kick <- false:
	default:
	}
}

// Stats are the counters.
func (b *Bridge) Stats() Stats {
	return Stats{Connected: b.connected.Load() && b.client.IsConnectionOpen(), Published: b.published.Load(), Dropped: b.dropped.Load(),
		ConnectionsLost: b.lost.Load(), CommandsApplied: b.applied.Load(), CommandsInvalid: b.invalid.Load(),
		CommandsDropped: b.cmdDropped.Load(), CommandsRejected: b.rejected.Load()}
}

// Close says "offline" (best effort, a second at most), disconnects and
// stops the goroutines.
func (b *Bridge) Close() {
	close(b.stop)
	b.wg.Wait()
	if b.client.IsConnectionOpen() {
		b.client.Publish(b.availability, 0, true, "offline").WaitTimeout(time.Second)
	}
	b.client.Disconnect(250)
}

package app

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"hash/fnv"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/buildinfo"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/metrics"
	"github.com/nxdns/nxdns/internal/mqtt"
	"github.com/nxdns/nxdns/internal/safefile"
)

// maxMQTTFile bounds mqtt.password_file and mqtt.ca_file.
const maxMQTTFile = 1 << 20

// mqttSetup is what a bridge was started with: a reload restarts the
// bridge only when it changed (the files' content included).
type mqttSetup struct {
	cfg      config.MQTT
	password string
	ca       string
}

// loadMQTT reads the files [mqtt] names. An unreadable file fails a
// reload (the running bridge stays) and, at start, leaves MQTT off with
// an error logged: a Home Assistant setting never takes the LAN's DNS down.
func loadMQTT(m config.MQTT) (mqttSetup, error) {
	s := mqttSetup{cfg: m}
	if !m.Enabled() {
		return s, nil
	}
	if m.PasswordFile != "" {
		b, err := safefile.ReadFile(m.PasswordFile, maxMQTTFile)
		if err != nil {
			return s, fmt.Errorf("mqtt.password_file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		s.password = strings.TrimRight(line, "\r")
	}
	if m.CAFile != "" {
		b, err := safefile.ReadFile(m.CAFile, maxMQTTFile)
		if err != nil {
			return s, fmt.Errorf("mqtt.ca_file: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return s, fmt.Errorf("mqtt.ca_file: %s holds no PEM certificate", m.CAFile)
		}
		s.ca = string(b)
	}
	return s, nil
}

// startMQTT starts the bridge for s; nil when [mqtt] is off.
func (a *App) startMQTT(s mqttSetup) (*mqtt.Bridge, error) {
	m := s.cfg
	if !m.Enabled() {
		return nil, nil
	}
	var tlsCfg *tls.Config
	if u, err := url.Parse(m.Broker); err == nil && u.Scheme == "mqtts" {
		roots, err := x509.SystemCertPool()
		if err != nil || roots == nil {
			roots = x509.NewCertPool()
		}
		roots.AppendCertsFromPEM([]byte(s.ca))
		name := m.TLSName
		if name == "" {
			name = u.Hostname()
		}
		tlsCfg = &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12}
	}
	return mqtt.Start(mqtt.Options{
		Broker: m.Broker, Username: m.Username, Password: s.password, TLS: tlsCfg,
		Prefix: m.Prefix, Discovery: m.DiscoveryPrefix,
		Publish: time.Duration(m.PublishSeconds) * time.Second, Logger: a.log,
	}, mqtt.Deps{Sensors: a.mqttSensors, Switches: a.mqttSwitches, Clients: a.mqttClients, Version: buildinfo.Get().Version})
}

// applyMQTT replaces the bridge when s differs from the running one's.
// Under a.mu (Start, Reload).
func (a *App) applyMQTT(s mqttSetup) {
	a.mqttPause.Store(int64(time.Duration(s.cfg.PauseMinutes) * time.Minute))
	cur := a.mqtt.Load()
	if cur != nil && s == a.mqttSetup {
		cur.Kick() // the groups or upstreams may have changed
		return
	}
	a.stopMQTT()
	a.mqttSetup = s
	b, err := a.startMQTT(s)
	if err != nil {
		a.log.Error("MQTT off: its settings do not work", zap.Error(err))
		return
	}
	a.mqtt.Store(b)
}

// stopMQTT closes the bridge, if one runs.
func (a *App) stopMQTT() {
	if b := a.mqtt.Swap(nil); b != nil {
		b.Close()
	}
}

// mqttSensors are the Home Assistant sensors, read from the same state as
// the dashboard and /metrics; today is since local midnight.
func (a *App) mqttSensors() mqtt.Sensors {
	var s mqtt.Sensors
	now := time.Now()
	y, mo, d := now.Date()
	if ov, err := a.history.OverviewFlushed(time.Date(y, mo, d, 0, 0, 0, 0, now.Location()), now, 1); err == nil {
		s.QueriesToday, s.BlockedToday, s.CacheHitRate = ov.Total, ov.Blocked, ov.CacheHitRate*100
	}
	for _, u := range a.gen.Load().pool.Snapshot().Upstreams {
		s.Upstreams++
		if !u.InBackoff {
			s.Healthy++
		}
		s.UpstreamStates = append(s.UpstreamStates, mqtt.Upstream{Name: u.URL, Up: !u.InBackoff})
	}
	s.Clock = string(a.clock.Current().State)
	s.DNSSEC = a.dnssecModeSensor()
	return s
}

// dnssecModeSensor is the DNSSEC mode sensor's state: dnssec.mode, or
// waiting_for_clock while enforce waits for a trusted clock.
func (a *App) dnssecModeSensor() string {
	h := a.dnssecHealth()
	if h.WaitingForClock {
		return "waiting_for_clock"
	}
	return h.Mode
}

// mqttClients are the clients the history saw in the last d (its top
// clients, at most history.MaxTop), named as the dashboard names them.
func (a *App) mqttClients(d time.Duration) []mqtt.Device {
	now := time.Now()
	ov, err := a.history.OverviewFlushed(now.Add(-d), now, history.MaxTop)
	if err != nil {
		return nil
	}
	out := make([]mqtt.Device, 0, len(ov.TopClients))
	for _, c := range ov.TopClients {
		out = append(out, mqtt.Device{Address: c.Key, Name: c.Label})
	}
	return out
}

var notTopicWord = regexp.MustCompile(`[^a-z0-9_]+`)

// switchID is a topic word for a group name: lower case, other characters
// folded to _, and a hash when folding changed it (two names must not meet).
func switchID(kind, name string) string {
	w := notTopicWord.ReplaceAllString(strings.ToLower(name), "_")
	if w != name {
		h := fnv.New32a()
		h.Write([]byte(name))
		w = fmt.Sprintf("%s_%06x", w, h.Sum32()&0xffffff)
	}
	return kind + "_" + w
}

// mqttSwitches are a switch per [[filter.groups]] group: on while its
// filtering runs; off pauses it for mqtt.pause_minutes, through the same
// Engine call as the dashboard's pause with group=, and nxdns ends the
// pause itself. Then a switch per group and blocked service (mqttServices).
func (a *App) mqttSwitches() []mqtt.Switch {
	st := a.gen.Load().filter
	if st == nil {
		return nil
	}
	pause := time.Duration(a.mqttPause.Load())
	var out []mqtt.Switch
	for _, g := range st.Groups() {
		out = append(out, mqtt.Switch{
			ID: switchID("group", g), Name: "Filtering " + g,
			On: func() bool { _, paused := a.filter.GroupPaused(g); return !paused },
			Set: func(on bool) error {
				if on {
					a.filter.ResumeGroup(g)
				} else {
					a.filter.PauseGroup(g, pause)
				}
				return nil
			},
		})
	}
	return append(out, a.mqttServices(st)...)
}

// mqttServices are a switch per group and blocked service: on while the
// service is blocked for the group; a command sets the group's switch on
// or off through Engine.SetSwitch, the call of the dashboard's switch (and
// replicated to [[peers]] as it is). A group's services are those its
// configuration names and those switched from the dashboard or Home
// Assistant since, in catalogue order, groups in configuration order, at
// most mqtt.MaxServiceSwitches in all (docs/how-to/home-assistant.md).
func (a *App) mqttServices(st *filter.Stage) []mqtt.Switch {
	catalogue := a.filter.Services().Services
	var out []mqtt.Switch
	for _, g := range a.filter.Groups(st) {
		for _, svc := range catalogue {
			_, switched := g.Overrides.Services[svc.ID]
			if !switched && !slices.Contains(g.Configured.Services, svc.ID) {
				continue
			}
			if len(out) >= mqtt.MaxServiceSwitches {
				return out
			}
			group, id := g.Name, svc.ID
			out = append(out, mqtt.Switch{
				ID: switchID("service", id+"_"+group), Name: "Block " + svc.Name + " (" + group + ")", Icon: "mdi:cancel",
				On: func() bool { return a.filter.SwitchOn(a.gen.Load().filter, group, filter.SwitchService, id) },
				Set: func(on bool) error {
					// Changed with an error: applied, not saved (logged
					// there); not changed with one: refused.
					if changed, err := a.filter.SetSwitch(group, filter.SwitchService, id, &on); !changed {
						return err
					}
					return nil
				},
			})
		}
	}
	return out
}

// mqttState is the bridge's counters for /metrics.
func (a *App) mqttState() metrics.MQTTState {
	b := a.mqtt.Load()
	if b == nil {
		return metrics.MQTTState{}
	}
	s := b.Stats()
	return metrics.MQTTState{Enabled: true, Connected: s.Connected, Published: s.Published, Dropped: s.Dropped,
		ConnectionsLost: s.ConnectionsLost, Applied: s.CommandsApplied, Invalid: s.CommandsInvalid,
		CommandsDropped: s.CommandsDropped, Rejected: s.CommandsRejected}
}

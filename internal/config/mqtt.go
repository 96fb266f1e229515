package config

import (
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
)

// MQTT is the [mqtt] section: Home Assistant over MQTT discovery
// (docs/home-assistant.md). An empty Broker turns it off.
type MQTT struct {
	// Broker is mqtt://IP:PORT or mqtts://IP:PORT. An IP address, never a
	// name: nxdns is often the host's own resolver, and a broker found
	// through it would vanish with the DNS it reports on.
	Broker       string `toml:"broker"`
	Username     string `toml:"username"`
	PasswordFile string `toml:"password_file"` // absolute; the password on its first line
	// TLSName is the name the broker's certificate must carry (mqtts);
	// "" checks the IP address.
	TLSName string `toml:"tls_name"`
	CAFile  string `toml:"ca_file"` // extra PEM roots for mqtts, on top of the system's
	// Prefix starts nxdns's own topics (PREFIX/status, PREFIX/switch/…)
	// and names the device; two nxdns on one broker need two prefixes.
	Prefix          string `toml:"prefix"`
	DiscoveryPrefix string `toml:"discovery_prefix"` // Home Assistant's, "homeassistant" unless changed there
	PauseMinutes    int    `toml:"pause_minutes"`    // how long a group switch turned off pauses filtering
	PublishSeconds  int    `toml:"publish_seconds"`  // how often the sensors are published
}

// Enabled reports whether nxdns talks to a broker.
func (m MQTT) Enabled() bool { return m.Broker != "" }

func defaultMQTT() MQTT {
	return MQTT{Prefix: "nxdns", DiscoveryPrefix: "homeassistant", PauseMinutes: 60, PublishSeconds: 30}
}

var mqttTopicWord = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func checkMQTT(ps *Problems, m MQTT) {
	if m.Broker == "" {
		return
	}
	u, err := url.Parse(m.Broker)
	switch {
	case err != nil:
		ps.add("mqtt.broker", CodeInvalidURL, "%q: %v", m.Broker, err)
	case u.Scheme != "mqtt" && u.Scheme != "mqtts":
		ps.add("mqtt.broker", CodeUnsupportedScheme, "%q: want mqtt://IP:PORT or mqtts://IP:PORT", m.Broker)
	case u.User != nil:
		ps.add("mqtt.broker", CodeUserinfo, "credentials in the URL: use mqtt.username and mqtt.password_file")
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		ps.add("mqtt.broker", CodeInvalidURL, "%q: want only a scheme, an IP address and a port", m.Broker)
	default:
		if _, err := netip.ParseAddrPort(u.Host); err != nil {
			ps.add("mqtt.broker", CodeInvalidAddress, "%q: want an IP address and a port (a broker found by name would need the DNS nxdns itself serves)", u.Host)
		}
	}
	if m.PasswordFile != "" && !filepath.IsAbs(m.PasswordFile) {
		ps.add("mqtt.password_file", CodeNotAbsolute, "%q: want an absolute path", m.PasswordFile)
	}
	if m.CAFile != "" && !filepath.IsAbs(m.CAFile) {
		ps.add("mqtt.ca_file", CodeCAFile, "%q: want an absolute path", m.CAFile)
	}
	if !mqttTopicWord.MatchString(m.Prefix) {
		ps.add("mqtt.prefix", CodeInvalidChoice, "%q: want 1 to 64 of A-Z, a-z, 0-9, _ and - (no / or MQTT wildcards)", m.Prefix)
	}
	if !mqttTopicWord.MatchString(m.DiscoveryPrefix) {
		ps.add("mqtt.discovery_prefix", CodeInvalidChoice, "%q: want 1 to 64 of A-Z, a-z, 0-9, _ and -", m.DiscoveryPrefix)
	}
	if m.PauseMinutes < 1 || m.PauseMinutes > 7*24*60 {
		ps.add("mqtt.pause_minutes", CodeOutOfRange, "%d: want 1 to 10080 (a week)", m.PauseMinutes)
	}
	if m.PublishSeconds < 5 || m.PublishSeconds > 3600 {
		ps.add("mqtt.publish_seconds", CodeOutOfRange, "%d: want 5 to 3600", m.PublishSeconds)
	}
}

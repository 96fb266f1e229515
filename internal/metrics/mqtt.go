package metrics

import "github.com/prometheus/client_golang/prometheus"

// MQTTState is the Home Assistant bridge's counts (internal/mqtt); the zero
// value (Enabled false) is [mqtt] off, and its series are left out.
type MQTTState struct {
	Enabled, Connected         bool
	Published, Dropped         uint64
	ConnectionsLost            uint64
	Applied, Invalid, Rejected uint64
	CommandsDropped            uint64
}

var (
	mqttConnected = prometheus.NewDesc("nxdns_mqtt_connected",
		"1 while nxdns is connected to the MQTT broker of [mqtt].", nil, nil)
	mqttMessages = prometheus.NewDesc("nxdns_mqtt_messages_total",
		"Messages for the broker: sent, or dropped (queue full, not connected, or the write timed out).",
		[]string{"result"}, nil)
	mqttLost = prometheus.NewDesc("nxdns_mqtt_connections_lost_total",
		"Connections to the broker that broke; nxdns reconnects with backoff.", nil, nil)
	mqttCommands = prometheus.NewDesc("nxdns_mqtt_commands_total",
		"Switch commands from the broker: applied, invalid (unknown switch or payload), dropped (a flood past the queue), rejected (the action failed).",
		[]string{"result"}, nil)
)

type mqttCollector struct{ snap func() MQTTState }

func (mqttCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mqttConnected
	ch <- mqttMessages
	ch <- mqttLost
	ch <- mqttCommands
}

func (c mqttCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	if !s.Enabled {
		return
	}
	connected := 0.0
	if s.Connected {
		connected = 1
	}
	send(ch, mqttConnected, prometheus.GaugeValue, connected)
	send(ch, mqttMessages, prometheus.CounterValue, float64(s.Published), "sent")
	send(ch, mqttMessages, prometheus.CounterValue, float64(s.Dropped), "dropped")
	send(ch, mqttLost, prometheus.CounterValue, float64(s.ConnectionsLost))
	for _, r := range []struct {
		n    uint64
		name string
	}{{s.Applied, "applied"}, {s.Invalid, "invalid"}, {s.CommandsDropped, "dropped"}, {s.Rejected, "rejected"}} {
		send(ch, mqttCommands, prometheus.CounterValue, float64(r.n), r.name)
	}
}

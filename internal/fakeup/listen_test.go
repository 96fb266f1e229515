package fakeup

import (
	"strings"
	"testing"
	"time"
)

func TestParseListen(t *testing.T) {
	tests := []struct {
		in      string
		want    Listen // Transport, Addr, Path, Behaviour compared
		wantErr string // substring; empty means success
	}{
		{in: "dot://127.0.0.1:8853?latency=30ms", want: Listen{Transport: DoT, Addr: "127.0.0.1:8853", Behaviour: Behaviour{Latency: 30 * time.Millisecond}}},
		{in: "doh://127.0.0.1:8443/dns-query?stall=1", want: Listen{Transport: DoH, Addr: "127.0.0.1:8443", Path: "/dns-query", Behaviour: Behaviour{Stall: true}}},
		{in: "doh://[::1]:8443", want: Listen{Transport: DoH, Addr: "[::1]:8443", Path: "/dns-query"}},
		{in: "udp://127.0.0.1:5300?tc=1&refuse=true", want: Listen{Transport: UDP, Addr: "127.0.0.1:5300", Behaviour: Behaviour{TC: true, Refuse: true}}},
		{in: "tcp://127.0.0.1:5300?idle_close=2s&jitter=5ms", want: Listen{Transport: TCP, Addr: "127.0.0.1:5300", Behaviour: Behaviour{IdleClose: 2 * time.Second, Jitter: 5 * time.Millisecond}}},
		{in: "dot://127.0.0.1:853?handshake_delay=1s", want: Listen{Transport: DoT, Addr: "127.0.0.1:853", Behaviour: Behaviour{HandshakeDelay: time.Second}}},
		{in: "dot://127.0.0.1:853?close_on_query=2", want: Listen{Transport: DoT, Addr: "127.0.0.1:853", Behaviour: Behaviour{CloseOnQuery: 2}}},
		{in: "tcp://127.0.0.1:53?close_on_query=1", want: Listen{Transport: TCP, Addr: "127.0.0.1:53", Behaviour: Behaviour{CloseOnQuery: 1}}},
		{in: "tcp://127.0.0.1:53?close_on_query=0", wantErr: "1 or more"},
		{in: "tcp://127.0.0.1:53?close_on_query=two", wantErr: "close_on_query=two"},
		{in: "udp://127.0.0.1:53?close_on_query=1", wantErr: "tcp and dot only"},
		{in: "doh://127.0.0.1:8443?close_on_query=1", wantErr: "tcp and dot only"},
		{in: "tls://127.0.0.1:853", wantErr: "scheme"},
		{in: "dot://127.0.0.1", wantErr: "host:port"},
		{in: "udp://127.0.0.1:53/path", wantErr: "only doh"},
		{in: "udp://127.0.0.1:53?latncy=1ms", wantErr: "unknown setting"},
		{in: "udp://127.0.0.1:53?latency=1ms&latency=2ms", wantErr: "2 times"},
		{in: "udp://127.0.0.1:53?latency=fast", wantErr: "latency=fast"},
		{in: "udp://127.0.0.1:53?latency=-1s", wantErr: "negative"},
		{in: "udp://127.0.0.1:53?latency=30m", wantErr: "bound"},
		{in: "tcp://127.0.0.1:53?tc=1", want: Listen{Transport: TCP, Addr: "127.0.0.1:53", Behaviour: Behaviour{TC: true}}},
		{in: "dot://127.0.0.1:853?ede_text=65000&tsig=1&txt=60000&slow_bytes=10ms&endless=1", want: Listen{Transport: DoT, Addr: "127.0.0.1:853",
			Behaviour: Behaviour{EDEText: 65000, TSIG: true, TXT: 60000, SlowBytes: 10 * time.Millisecond, Endless: true}}},
		{in: "udp://127.0.0.1:53?endless=1", wantErr: "tcp and dot only"},
		{in: "doh://127.0.0.1:443?slow_bytes=1ms", wantErr: "tcp and dot only"},
		{in: "dot://127.0.0.1:853?ede_text=65536", wantErr: "65000-byte bound"},
		{in: "udp://127.0.0.1:53?idle_close=1s", wantErr: "not udp"},
		{in: "tcp://127.0.0.1:53?handshake_delay=1s", wantErr: "dot and doh"},
		{in: "dot://user@127.0.0.1:853", wantErr: "userinfo"},
		{in: "doq://127.0.0.1:853?early_data=1", want: Listen{Transport: DoQ, Addr: "127.0.0.1:853", Behaviour: Behaviour{EarlyData: true}}},
		{in: "dot://127.0.0.1:853?early_data=1", wantErr: "doq only"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseListen(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Transport != tt.want.Transport || got.Addr != tt.want.Addr || got.Path != tt.want.Path || got.Behaviour != tt.want.Behaviour {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestListenKey_dropsTheQuery(t *testing.T) {
	l, err := ParseListen("doh://127.0.0.1:8443/dns-query?latency=5ms&stall=1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.key(nil), "doh://127.0.0.1:8443/dns-query"; got != want {
		t.Errorf("key = %q, want %q", got, want)
	}
}

func TestDelay_latencyPlusUniformJitter(t *testing.T) {
	l := &listener{s: &Server{}, Listen: Listen{Behaviour: Behaviour{Latency: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}}}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := l.delay(nil)
		if d < 10*time.Millisecond || d > 15*time.Millisecond {
			t.Fatalf("delay %v outside [10ms, 15ms]", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("%d distinct delays in 1000 draws, want jitter to spread them", len(seen))
	}
}

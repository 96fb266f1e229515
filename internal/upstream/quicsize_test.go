package upstream

import (
	"testing"

	"github.com/miekg/dns"
)

// packQUIC's wire form advertises 65535 bytes, keeps the query's DO bit
// and padding, and leaves the message it was given as it was: the pool
// may send the same message to a DoT or UDP upstream next.
func TestPackQUIC_advertises65535AndLeavesTheQueryAlone(t *testing.T) {
	m := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
	m.SetEdns0(1232, true)
	wire, err := packQUIC(m)
	if err != nil {
		t.Fatal(err)
	}
	sent := new(dns.Msg)
	if err := sent.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	if o := sent.IsEdns0(); o == nil || o.UDPSize() != dns.MaxMsgSize || !o.Do() || len(o.Option) != 1 {
		t.Fatalf("sent OPT %v, want size 65535, DO and one padding option", o)
	}
	if o := m.IsEdns0(); o.UDPSize() != 1232 || len(o.Option) != 0 {
		t.Fatalf("the query's own OPT became %v", o)
	}
}

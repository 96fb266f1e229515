package dashboard

import "testing"

func TestDNSSECZone_onlyFromABogusVerdict(t *testing.T) {
	code := func(c uint16) *uint16 { return &c }
	for _, c := range []struct {
		q    QueryJSON
		want string
	}{
		{QueryJSON{EDECode: code(9), EDEText: "paypal.com.: no DNSKEY matches the DS set"}, "paypal.com"},
		{QueryJSON{EDECode: code(7), EDEText: "expired.example.: the RRSIG over www.expired.example. A has expired"}, "expired.example"},
		{QueryJSON{EDECode: code(22), EDEText: "budget exhausted after 4000 ms"}, ""},
		{QueryJSON{EDECode: code(6), EDEText: "no zone here"}, ""},
		{QueryJSON{EDECode: code(6), EDEText: ".: the root"}, ""},
		{QueryJSON{}, ""},
	} {
		if got := dnssecZone(c.q); got != c.want {
			t.Errorf("%+v: %q, want %q", c.q, got, c.want)
		}
	}
}

package upstream

import (
	"testing"

	"github.com/nxdns/nxdns/internal/testutil"
)

// Every transport leaves the query as it was (Client), so the pool may hand
// each attempt the caller's message uncopied. The query is one as nxdns
// sends it, with an OPT record of its own, and goes out twice: anything a
// transport left in it (padding in its OPT, an ID of the wire's) would show.
func TestClients_leaveTheQueryAsItWas(t *testing.T) {
	_, dot, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
	_, doh := dohTestSetup(t, "doh.test", testutil.AnswerA("192.0.2.1"))
	_, doh3 := doh3TestSetup(t)
	_, doq := doqTestSetup(t)
	for name, c := range map[string]Client{"dot": dot, "doh": doh, "doh3": doh3, "doq": doq} {
		q := transportQuery("a.example.")
		q.Id, q.AuthenticatedData = 0xbeef, true
		q.SetEdns0(1232, true)
		want := q.String()
		for i := range 2 {
			if _, err := c.Exchange(transportCtx(t), q); err != nil {
				t.Fatalf("%s, exchange %d: %v", name, i, err)
			}
			if got := q.String(); got != want {
				t.Errorf("%s, after exchange %d the query is\n%s\nwant\n%s", name, i, got, want)
			}
		}
	}
}

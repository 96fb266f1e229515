package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/miekg/dns"
)

// FuzzServeDoH: whatever a DoH request carries, the handler answers one of
// its documented statuses (200 with a DNS message, or a counted error) and
// never panics.
func FuzzServeDoH(f *testing.F) {
	q, _ := newQuery("fuzz.example.", dns.TypeA).Pack()
	f.Add(true, string(q), "", []byte(nil))
	f.Add(false, "", dohContentType, q)
	f.Add(false, "", "application/dns-message; charset=x", []byte{0, 1, 2})
	f.Add(true, "%%%", "", []byte(nil))
	s := New(Options{}, state(answerA("192.0.2.30")))
	f.Cleanup(func() { s.Shutdown(f.Context()) })
	allowed := map[int]bool{200: true, 400: true, 413: true, 414: true, 415: true, 503: true}
	f.Fuzz(func(t *testing.T, get bool, param, ctype string, body []byte) {
		var r *http.Request
		if get {
			r = httptest.NewRequest("GET", "/dns-query?dns="+url.QueryEscape(param), nil)
		} else {
			r = httptest.NewRequest("POST", "/dns-query", bytes.NewReader(body))
			r.Header.Set("Content-Type", ctype)
		}
		r.RemoteAddr = "127.0.0.1:5353"
		w := httptest.NewRecorder()
		s.serveDoH(w, r)
		if !allowed[w.Code] {
			t.Fatalf("status %d", w.Code)
		}
		if w.Code == 200 {
			var m dns.Msg
			if err := m.Unpack(w.Body.Bytes()); err != nil || !m.Response {
				t.Fatalf("200 with a body that is not a DNS response: %v", err)
			}
		}
	})
}

package local

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzNew feeds [local] records (newline-separated, one record per line)
// to New and, when they build, asks for each owner: a record text never
// panics the loader or the stage.
func FuzzNew(f *testing.F) {
	for _, s := range household {
		f.Add(s)
	}
	f.Add("a.home. CNAME b.home.\nb.home. CNAME a.home.")
	f.Add("x. 0 IN TXT \"\\000\"")
	f.Add("$ORIGIN home.\nnas A 1.2.3.4")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := New(Options{Records: strings.Split(text, "\n"), BypassGuards: true})
		if err != nil {
			return
		}
		for name := range s.names {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY, dns.TypePTR, dns.TypeCNAME} {
				ask(t, s, name, qt)
			}
		}
	})
}

package dnssec

import (
	"context"
	"strings"

	"github.com/miekg/dns"
)

// answer is the validation of one response.
type answer struct {
	v       *Validator
	ctx     context.Context
	w       *work
	resp    *dns.Msg
	auth    []*rrset
	verdict Result
	proofs  map[string]*proofs // per signer, validated once
	// validUntil is the earliest expiration (Unix seconds) of the
	// signatures the answer section's RRsets and the denials that prove
	// the answer verified with; 0 for none.
	validUntil int64
}

// merge folds one part's verdict into the answer's: bogus over insecure
// over secure; the first reason of the worst status is kept.
func (a *answer) merge(r Result) {
	rank := func(s Status) int {
		switch s {
		case Bogus:
			return 3
		case Indeterminate:
			return 2
		case Insecure:
			return 1
		case Secure:
			return 0
		}
		return 0
	}
	if rank(r.Status) > rank(a.verdict.Status) {
		a.verdict = r
	}
}

func (a *answer) budget(zone string) { a.merge(budgetResult(zone)) }

func (a *answer) run(qname string, qtype uint16) {
	sets := group(a.resp.Answer)
	a.auth = group(a.resp.Ns)
	// Every RRset of the answer section, except the CNAMEs a DNAME in it
	// synthesised (RFC 6672 §5.3.1: unsigned, checked against the DNAME).
	for _, s := range sets {
		if s.rtype == dns.TypeCNAME && synthesised(sets, s) {
			continue
		}
		a.checkSet(s)
		if a.verdict.Status == Bogus {
			return
		}
	}
	// Follow the chain from the question to where it ends; if the chain
	// ends without the type asked for, that is a negative answer to prove.
	name := qname
	for hop := 0; hop <= maxChain; hop++ {
		if qtype == dns.TypeANY && hasAny(sets, name) || findSet(sets, name, qtype) != nil {
			return
		}
		if c := findSet(sets, name, dns.TypeCNAME); c != nil {
			name = canonical(c.rrs[0].(*dns.CNAME).Target)
			continue
		}
		if d := dnameAbove(sets, name); d != nil {
			name = substitute(name, d)
			continue
		}
		break
	}
	a.checkNegative(name, qtype)
}

func hasAny(sets []*rrset, name string) bool {
	for _, s := range sets {
		if s.name == name {
			return true
		}
	}
	return false
}

// dnameAbove is a DNAME in sets owned by a strict ancestor of name.
func dnameAbove(sets []*rrset, name string) *dns.DNAME {
	for _, s := range sets {
		if s.rtype == dns.TypeDNAME && strictlyUnder(s.name, name) {
			return s.rrs[0].(*dns.DNAME)
		}
	}
	return nil
}

func substitute(name string, d *dns.DNAME) string {
	owner := canonical(d.Hdr.Name)
	return canonical(strings.TrimSuffix(name, owner) + dns.Fqdn(d.Target))
}

// synthesised reports whether the CNAME set c is the one a DNAME in sets
// gives its owner.
func synthesised(sets []*rrset, c *rrset) bool {
	d := dnameAbove(sets, c.name)
	return d != nil && len(c.rrs) == 1 && canonical(c.rrs[0].(*dns.CNAME).Target) == substitute(c.name, d)
}

// checkSet validates one RRset of the answer section.
func (a *answer) checkSet(s *rrset) {
	v := a.v
	signer := signerOf(s, s.name)
	zk := a.signerKeys(signer, s.name, dns.ExtendedErrorCodeRRSIGsMissing, "no RRSIG over "+s.name+" "+dns.TypeToString[s.rtype])
	if zk == nil {
		return
	}
	sig, fail, err := v.verify(a.w, s, signer, zk.keys, zk.tags)
	if err != nil {
		a.budget(signer)
		return
	}
	if fail != nil {
		a.merge(*fail)
		return
	}
	a.until(absTime(sig.Expiration, a.v.now().Unix()))
	if int(sig.Labels) < labels(s.name) {
		p := a.proofsOf(signer, zk)
		if p == nil {
			return
		}
		pr, err := p.wildcard(s.name, int(sig.Labels))
		a.mergeProof(signer, pr, err)
	}
}

// signerKeys is signer's keys when they are secure. Otherwise it merges
// the verdict and returns nil: signer's (insecure or bogus), or, when
// nothing signed the records at name (signer ""), their zone's — insecure
// when it is, else bogus with ede and reason, since a signed zone's
// records come signed.
func (a *answer) signerKeys(signer, name string, ede uint16, reason string) *zoneKeys {
	var zk *zoneKeys
	if signer == "" {
		zk = a.v.enclosing(a.ctx, a.w, name)
		if zk.Status == Secure {
			a.merge(Result{Status: Bogus, Zone: zk.Zone, EDE: ede, Reason: reason})
			return nil
		}
	} else {
		zk = a.v.keys(a.ctx, a.w, signer)
	}
	if zk.Status != Secure || signer == "" {
		a.merge(zk.Result)
		return nil
	}
	return zk
}

// proofsOf validates the authority section's NSEC and NSEC3 records signed
// by zone, once per answer; nil when that made the answer bogus.
func (a *answer) proofsOf(zone string, zk *zoneKeys) *proofs {
	if p, ok := a.proofs[zone]; ok {
		return p
	}
	p, fail, err := a.v.denials(a.w, a.auth, zone, zk)
	switch {
	case err != nil:
		a.budget(zone)
	case fail != nil:
		a.merge(*fail)
	}
	if a.proofs == nil {
		a.proofs = map[string]*proofs{}
	}
	a.proofs[zone] = p
	if p != nil {
		a.until(p.until)
	}
	return p
}

// until lowers validUntil to exp (Unix seconds; 0 is none).
func (a *answer) until(exp int64) {
	if exp != 0 && (a.validUntil == 0 || exp < a.validUntil) {
		a.validUntil = exp
	}
}

func (a *answer) mergeProof(zone string, pr proof, err error) {
	switch {
	case err != nil:
		a.budget(zone)
	case pr.kind == proofInsecure:
		a.merge(Result{Status: Insecure, Zone: zone, Reason: pr.reason})
	case pr.kind != proofSecure:
		a.merge(Result{Status: Bogus, Zone: zone, EDE: dns.ExtendedErrorCodeNSECMissing, Reason: pr.reason})
	}
}

// checkNegative proves that name has no qtype records (NODATA) or does not
// exist (NXDOMAIN), as the rcode says.
func (a *answer) checkNegative(name string, qtype uint16) {
	signer := denialSigner(a.auth, name)
	zk := a.signerKeys(signer, name, missingDenial(a.auth), "no signed proof of the negative answer for "+name)
	if zk == nil {
		return
	}
	p := a.proofsOf(signer, zk)
	if p == nil {
		return
	}
	var pr proof
	var err error
	if a.resp.Rcode == dns.RcodeNameError {
		pr, err = p.nameError(name)
	} else {
		pr, err = p.noData(name, qtype)
	}
	a.mergeProof(signer, pr, err)
}

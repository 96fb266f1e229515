package dnssec

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// zoneKeys is what the validator knows of a zone: its status and, when
// secure, its validated DNSKEY set.
type zoneKeys struct {
	Result
	keys      []*dns.DNSKEY
	tags      []uint16
	expires   time.Time
	transient bool // a fetch failed or the budget ran out: not cached
	refused   bool // the upstream answered a fetch with an error rcode: cached briefly
}

// refusedTTL is how long a zone whose DS or DNSKEY lookup the upstream
// answered with an error (SERVFAIL, REFUSED) stays bogus without being
// asked again: a zone that never answers is not asked on every miss, and
// one that recovers is believed again within seconds (docs/dnssec.md
// "Bounds"). A lookup that got no answer at all (timeout, connection
// failure) is not cached.
const refusedTTL = 5 * time.Second

// errRefused is a DS or DNSKEY lookup the upstream answered with an error
// rcode, or without a message.
type errRefused struct{ rcode string }

func (e errRefused) Error() string { return e.rcode }

// fetchFailed is the verdict on apex when its lookup failed with err.
func fetchFailed(apex string, err error, format string) *zoneKeys {
	zk := bogus(apex, dns.ExtendedErrorCodeDNSKEYMissing, format, err)
	_, zk.refused = err.(errRefused)
	zk.transient = !zk.refused
	return zk
}

func supportedAlg(a uint8) bool {
	switch a {
	case dns.RSASHA256, dns.RSASHA512, dns.ECDSAP256SHA256, dns.ECDSAP384SHA384, dns.ED25519:
		return true
	}
	return false
}

func supportedDigest(d uint8) bool {
	return d == dns.SHA1 || d == dns.SHA256 || d == dns.SHA384
}

func bogus(zone string, ede uint16, format string, args ...any) *zoneKeys {
	return &zoneKeys{Result: Result{Status: Bogus, Zone: zone, EDE: ede, Reason: fmt.Sprintf(format, args...)}}
}

func insecure(zone, format string, args ...any) *zoneKeys {
	return &zoneKeys{Result: Result{Status: Insecure, Zone: zone, Reason: fmt.Sprintf(format, args...)}}
}

func budgetKeys(zone string) *zoneKeys {
	return &zoneKeys{Result: budgetResult(zone), transient: true}
}

// insecureAbove is a cached insecure verdict on name or an ancestor of
// it, nil for none: below an unsigned delegation every zone is insecure
// (the chain of trust cannot resume), so a new name there costs no lookup.
func (v *Validator) insecureAbove(name string) *zoneKeys {
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	for n := name; ; n = parent(n) {
		for _, k := range [2]string{"e" + n, "k" + n} {
			if zk := v.cache[k]; zk != nil && zk.Status == Insecure && now.Before(zk.expires) {
				return zk
			}
		}
		if n == "." {
			return nil
		}
	}
}

// cached returns a cached verdict that has not expired.
func (v *Validator) cached(key string) *zoneKeys {
	v.mu.Lock()
	defer v.mu.Unlock()
	zk := v.cache[key]
	if zk != nil && v.now().Before(zk.expires) {
		return zk
	}
	return nil
}

func (v *Validator) store(key string, zk *zoneKeys) {
	if zk.transient {
		return
	}
	// A copy: zk may be another key's cached verdict (a child's status is
	// often its parent's), which other queries read and whose end this
	// must not move.
	c := *zk
	zk = &c
	now := v.now()
	switch {
	case zk.refused:
		zk.expires = now.Add(refusedTTL)
	case zk.Status == Bogus:
		zk.expires = now.Add(30 * time.Second)
	case zk.expires.IsZero() || zk.expires.After(now.Add(time.Hour)):
		zk.expires = now.Add(time.Hour)
	}
	v.mu.Lock()
	if len(v.cache) >= cacheMax {
		clear(v.cache)
	}
	v.cache[key] = zk
	v.mu.Unlock()
}

// once computes key's verdict with f, sharing one computation between the
// queries that ask at the same time, and caches it. A query waits for
// another's computation no longer than its own ctx allows; when the one it
// shared failed for a passing reason (that query's deadline, say), it
// computes its own.
func (v *Validator) once(ctx context.Context, key string, f func() *zoneKeys) *zoneKeys {
	if zk := v.cached(key); zk != nil {
		return zk
	}
	ch := v.group.DoChan(key, func() (any, error) {
		zk := f()
		v.store(key, zk)
		return zk, nil
	})
	select {
	case r := <-ch:
		zk := r.Val.(*zoneKeys)
		if zk.transient && r.Shared && ctx.Err() == nil {
			zk = f()
			v.store(key, zk)
		}
		return zk
	case <-ctx.Done():
		zk := bogus(key[1:], dns.ExtendedErrorCodeDNSKEYMissing, "the query's time ran out waiting for %s's keys", key[1:])
		zk.transient = true
		return zk
	}
}

// fetch spends one fetch of the query's budget.
func (v *Validator) fetchSet(ctx context.Context, w *work, name string, qtype uint16) (*dns.Msg, error) {
	if !take(&w.fetches) {
		return nil, errBudget
	}
	m, err := v.fetch(ctx, name, qtype)
	if err != nil {
		return nil, err
	}
	if m == nil || (m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError) {
		rc := "no answer"
		if m != nil {
			rc = dns.RcodeToString[m.Rcode]
		}
		return nil, errRefused{rc}
	}
	return m, nil
}

// keys is the status of the zone whose apex is apex and, when secure, its
// validated DNSKEY set.
func (v *Validator) keys(ctx context.Context, w *work, apex string) *zoneKeys {
	if n := v.nta(apex); n != "" {
		return insecure(n, "negative trust anchor")
	}
	return v.once(ctx, "k"+apex, func() *zoneKeys { return v.loadKeys(ctx, w, apex, nil) })
}

// loadKeys validates apex's DNSKEY set against ds, or against the DS set
// it looks up when ds is nil.
func (v *Validator) loadKeys(ctx context.Context, w *work, apex string, ds []*dns.DS) *zoneKeys {
	expires := v.now().Add(time.Hour)
	if ds == nil {
		if a, ok := v.anchors[apex]; ok {
			ds = a
		} else {
			o := v.dsProof(ctx, w, apex)
			switch {
			case o.ds != nil:
				ds, expires = o.ds, o.expires
			case o.notCut && o.zk.Status == Secure:
				return bogus(apex, dns.ExtendedErrorCodeDNSBogus, "%s signs records, but its parent zone %s proves it is no delegation", apex, o.zk.Zone)
			default:
				return o.zk
			}
		}
	}
	var usable []*dns.DS
	for _, d := range ds {
		if supportedAlg(d.Algorithm) && supportedDigest(d.DigestType) {
			usable = append(usable, d)
		}
	}
	if len(usable) == 0 {
		return insecure(apex, "no DS of a supported algorithm and digest (RFC 6840 §5.2)")
	}
	m, err := v.fetchSet(ctx, w, apex, dns.TypeDNSKEY)
	if err == errBudget {
		return budgetKeys(apex)
	}
	if err != nil {
		return fetchFailed(apex, err, "fetching the DNSKEY set failed: %v")
	}
	set := findSet(group(m.Answer), apex, dns.TypeDNSKEY)
	if set == nil {
		return bogus(apex, dns.ExtendedErrorCodeDNSKEYMissing, "no DNSKEY set")
	}
	var all []*dns.DNSKEY
	var tags []uint16
	var entry []*dns.DNSKEY // keys a DS vouches for
	var entryTags []uint16
	for _, rr := range set.rrs {
		k := rr.(*dns.DNSKEY)
		if !supportedAlg(k.Algorithm) {
			continue
		}
		tag := k.KeyTag()
		all, tags = append(all, k), append(tags, tag)
		for _, d := range usable {
			if d.KeyTag == tag && d.Algorithm == k.Algorithm {
				if kd := k.ToDS(d.DigestType); kd != nil && strings.EqualFold(kd.Digest, d.Digest) {
					entry, entryTags = append(entry, k), append(entryTags, tag)
					break
				}
			}
		}
	}
	if len(entry) == 0 {
		return bogus(apex, dns.ExtendedErrorCodeDNSKEYMissing, "no DNSKEY matches the DS set")
	}
	sig, fail, err := v.verify(w, set, apex, entry, entryTags)
	if err != nil {
		return budgetKeys(apex)
	}
	if fail != nil {
		return &zoneKeys{Result: *fail}
	}
	zk := &zoneKeys{Result: Result{Status: Secure, Zone: apex}, keys: all, tags: tags}
	zk.expires = minTime(expires, v.setExpiry(set, sig))
	return zk
}

// setExpiry is when a validated set stops being usable: its TTL or its
// signature's expiration, whichever comes first.
func (v *Validator) setExpiry(s *rrset, sig *dns.RRSIG) time.Time {
	now := v.now()
	ttl := s.rrs[0].Header().Ttl
	t := now.Add(time.Duration(ttl) * time.Second)
	exp := time.Unix(absTime(sig.Expiration, now.Unix()), 0)
	return minTime(t, exp)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// absTime places a 32-bit signature time nearest to now (RFC 4034 §3.1.5
// serial arithmetic).
func absTime(x uint32, now int64) int64 { return now + int64(int32(x-uint32(now))) }

// timeCheck is the EDE of a signature outside its validity period with the
// allowed skew either side, 0 when it is within.
func (v *Validator) timeCheck(sig *dns.RRSIG) uint16 {
	now := v.now().Unix()
	skew := int64(v.skew / time.Second)
	if now+skew < absTime(sig.Inception, now) {
		return dns.ExtendedErrorCodeSignatureNotYetValid
	}
	if now-skew > absTime(sig.Expiration, now) {
		return dns.ExtendedErrorCodeSignatureExpired
	}
	return 0
}

// verify checks s against zone's keys: the RRSIG that verified, or a Bogus
// Result that says why none did; errBudget when a bound was reached.
func (v *Validator) verify(w *work, s *rrset, zone string, keys []*dns.DNSKEY, tags []uint16) (*dns.RRSIG, *Result, error) {
	what := s.name + " " + dns.TypeToString[s.rtype]
	if len(s.sigs) == 0 {
		return nil, &Result{Status: Bogus, Zone: zone, EDE: dns.ExtendedErrorCodeRRSIGsMissing, Reason: "no RRSIG over " + what}, nil
	}
	tries, timeFail, keyFound := 0, uint16(0), false
	owner := labels(s.name)
	for _, sig := range s.sigs {
		if !strings.EqualFold(dns.Fqdn(sig.SignerName), zone) || !supportedAlg(sig.Algorithm) || int(sig.Labels) > owner {
			continue
		}
		for i, k := range keys {
			if tags[i] != sig.KeyTag || k.Algorithm != sig.Algorithm {
				continue
			}
			keyFound = true
			if code := v.timeCheck(sig); code != 0 {
				timeFail = code
				break // the same signature with another key is no more valid
			}
			if tries == MaxKeyTries || !take(&w.sigs) {
				return nil, nil, errBudget
			}
			tries++
			w.verified.Add(1)
			if sig.Verify(k, s.rrs) == nil {
				return sig, nil, nil
			}
		}
	}
	r := &Result{Status: Bogus, Zone: zone}
	switch {
	case tries == 0 && timeFail == dns.ExtendedErrorCodeSignatureExpired:
		r.EDE, r.Reason = timeFail, "the RRSIG over "+what+" has expired"
	case tries == 0 && timeFail != 0:
		r.EDE, r.Reason = timeFail, "the RRSIG over "+what+" is not yet valid"
	case !keyFound:
		r.EDE, r.Reason = dns.ExtendedErrorCodeDNSKEYMissing, "no DNSKEY of "+zone+" matches an RRSIG over "+what
	default:
		r.EDE, r.Reason = dns.ExtendedErrorCodeDNSBogus, "no RRSIG over "+what+" verifies"
	}
	return nil, r, nil
}

// dsOutcome is what a DS lookup proved about name.
type dsOutcome struct {
	ds      []*dns.DS // a validated DS set: name is a secure delegation
	expires time.Time
	notCut  bool      // name is no zone cut; zk is the enclosing zone's keys
	zk      *zoneKeys // the enclosing zone (notCut), or the verdict (insecure, bogus)
}

// dsProof looks up name's DS set and proves what it says: a validated DS
// set, a proven unsigned delegation (insecure), that name is no zone cut,
// or why none of that holds (bogus). Every zone it asks about is a strict
// ancestor of name, so the recursion ends at a trust anchor.
func (v *Validator) dsProof(ctx context.Context, w *work, name string) dsOutcome {
	m, err := v.fetchSet(ctx, w, name, dns.TypeDS)
	if err == errBudget {
		return dsOutcome{zk: budgetKeys(name)}
	}
	if err != nil {
		return dsOutcome{zk: fetchFailed(name, err, "fetching the DS set failed: %v")}
	}
	if set := findSet(group(m.Answer), name, dns.TypeDS); set != nil {
		signer := signerOf(set, name)
		if signer == "" || !strictlyUnder(signer, name) {
			st := v.enclosing(ctx, w, parent(name))
			if st.Status == Secure {
				return dsOutcome{zk: bogus(st.Zone, dns.ExtendedErrorCodeRRSIGsMissing, "no RRSIG by %s over %s DS", st.Zone, name)}
			}
			return dsOutcome{zk: st}
		}
		pk := v.keys(ctx, w, signer)
		if pk.Status != Secure {
			return dsOutcome{zk: pk}
		}
		sig, fail, err := v.verify(w, set, signer, pk.keys, pk.tags)
		if err != nil {
			return dsOutcome{zk: budgetKeys(signer)}
		}
		if fail != nil {
			return dsOutcome{zk: &zoneKeys{Result: *fail}}
		}
		ds := make([]*dns.DS, 0, len(set.rrs))
		for _, rr := range set.rrs {
			ds = append(ds, rr.(*dns.DS))
		}
		return dsOutcome{ds: ds, expires: v.setExpiry(set, sig)}
	}
	// No DS: a signed denial, or an unsigned one from an unsigned zone.
	auth := group(m.Ns)
	signer := denialSigner(auth, name)
	if signer == "" || !strictlyUnder(signer, name) {
		anc := parent(name)
		if soa := soaOwner(auth); soa != "" && strictlyUnder(soa, name) {
			anc = soa
		}
		st := v.enclosing(ctx, w, anc)
		if st.Status == Secure {
			return dsOutcome{zk: bogus(st.Zone, missingDenial(auth), "no signed proof that %s has no DS", name)}
		}
		return dsOutcome{zk: st}
	}
	pk := v.keys(ctx, w, signer)
	if pk.Status != Secure {
		return dsOutcome{zk: pk}
	}
	d, fail, err := v.denials(w, auth, signer, pk)
	if err != nil {
		return dsOutcome{zk: budgetKeys(signer)}
	}
	if fail != nil {
		return dsOutcome{zk: &zoneKeys{Result: *fail}}
	}
	p, err := d.dsDenial(name)
	if err != nil {
		return dsOutcome{zk: budgetKeys(signer)}
	}
	switch p.kind {
	case proofInsecure:
		return dsOutcome{zk: insecure(name, "%s", p.reason)}
	case proofNotCut:
		return dsOutcome{notCut: true, zk: pk}
	default: // proofNone, proofSecure: no proof that the DS is absent
		return dsOutcome{zk: bogus(signer, dns.ExtendedErrorCodeNSECMissing, "%s", p.reason)}
	}
}

// enclosing is the status of the zone that holds name's records: that
// zone's keys when it is secure.
func (v *Validator) enclosing(ctx context.Context, w *work, name string) *zoneKeys {
	if n := v.nta(name); n != "" {
		return insecure(n, "negative trust anchor")
	}
	if _, ok := v.anchors[name]; ok {
		return v.keys(ctx, w, name)
	}
	if v.anchorFor(name) == "" {
		return &zoneKeys{Result: Result{Status: Indeterminate, Reason: "no trust anchor above " + name}}
	}
	if zk := v.insecureAbove(name); zk != nil {
		return zk
	}
	return v.once(ctx, "e"+name, func() *zoneKeys {
		o := v.dsProof(ctx, w, name)
		switch {
		case o.ds != nil:
			return v.keysWithDS(ctx, w, name, o.ds)
		case o.notCut:
			return o.zk
		}
		return o.zk
	})
}

// keysWithDS is keys for an apex whose DS set is already validated.
func (v *Validator) keysWithDS(ctx context.Context, w *work, apex string, ds []*dns.DS) *zoneKeys {
	return v.once(ctx, "k"+apex, func() *zoneKeys { return v.loadKeys(ctx, w, apex, ds) })
}

// signerOf is the signer of set's RRSIGs that could have signed records of
// name (name's zone or an ancestor's), "" for none.
func signerOf(set *rrset, name string) string {
	best := ""
	for _, sig := range set.sigs {
		s := canonical(sig.SignerName)
		if under(s, name) && len(s) > len(best) {
			best = s
		}
	}
	return best
}

// denialSigner is the zone that signed the negative answer's SOA, NSEC or
// NSEC3 records for name, "" when none of them is signed.
func denialSigner(auth []*rrset, name string) string {
	best := ""
	for _, s := range auth {
		if s.rtype != dns.TypeSOA && s.rtype != dns.TypeNSEC && s.rtype != dns.TypeNSEC3 {
			continue
		}
		if sg := signerOf(s, name); len(sg) > len(best) {
			best = sg
		}
	}
	return best
}

func soaOwner(auth []*rrset) string {
	for _, s := range auth {
		if s.rtype == dns.TypeSOA {
			return s.name
		}
	}
	return ""
}

// missingDenial is the EDE of a negative answer from a signed zone that
// proves nothing: RRSIGs stripped when it has NSEC records, NSEC missing
// when it has none.
func missingDenial(auth []*rrset) uint16 {
	for _, s := range auth {
		if s.rtype == dns.TypeNSEC || s.rtype == dns.TypeNSEC3 || s.rtype == dns.TypeSOA {
			return dns.ExtendedErrorCodeRRSIGsMissing
		}
	}
	return dns.ExtendedErrorCodeNSECMissing
}

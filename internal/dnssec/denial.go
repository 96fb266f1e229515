package dnssec

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// proofKind is what a denial proved.
type proofKind uint8

const (
	proofNone     proofKind = iota // nothing: bogus
	proofSecure                    // the denial holds
	proofInsecure                  // an opt-out span or too many NSEC3 iterations
	proofNotCut                    // (DS lookups) the name is no zone cut
)

type proof struct {
	kind   proofKind
	reason string
}

// proofs are a zone's validated NSEC and NSEC3 records from one answer.
type proofs struct {
	zone  string
	nsec  []*dns.NSEC
	nsec3 []*dns.NSEC3
	n3    *nsec3Params // nil when there are no usable NSEC3 records
	w     *work
	hash  map[string]string
	// until is the earliest expiration (Unix seconds) of the signatures
	// over these records; 0 for none.
	until int64
}

type nsec3Params struct {
	iter uint16
	salt string
}

// denials validates every NSEC and NSEC3 RRset in auth that zone signed
// (an unsigned one, or one whose signature fails, makes the answer bogus)
// and returns them.
func (v *Validator) denials(w *work, auth []*rrset, zone string, zk *zoneKeys) (*proofs, *Result, error) {
	p := &proofs{zone: zone, w: w, hash: map[string]string{}}
	for _, s := range auth {
		if s.rtype != dns.TypeNSEC && s.rtype != dns.TypeNSEC3 {
			continue
		}
		if !under(zone, s.name) {
			continue // another zone's records: no part of this proof
		}
		sig, fail, err := v.verify(w, s, zone, zk.keys, zk.tags)
		if err != nil || fail != nil {
			return nil, fail, err
		}
		if exp := absTime(sig.Expiration, v.now().Unix()); p.until == 0 || exp < p.until {
			p.until = exp
		}
		for _, rr := range s.rrs {
			switch r := rr.(type) {
			case *dns.NSEC:
				p.nsec = append(p.nsec, r)
			case *dns.NSEC3:
				p.nsec3 = append(p.nsec3, r)
			}
		}
	}
	// RFC 5155 §8.2: only SHA-1, and one parameter set; records with other
	// parameters are ignored.
	n3 := p.nsec3[:0]
	for _, r := range p.nsec3 {
		if r.Hash != dns.SHA1 {
			continue
		}
		if p.n3 == nil {
			p.n3 = &nsec3Params{iter: r.Iterations, salt: strings.ToUpper(r.Salt)}
		}
		if r.Iterations == p.n3.iter && strings.EqualFold(r.Salt, p.n3.salt) {
			n3 = append(n3, r)
		}
	}
	p.nsec3 = n3
	return p, nil, nil
}

// noNSEC3 is the verdict when the NSEC3 records cannot prove what is
// asked (what names it): none there (no proof), or above
// MaxNSEC3Iterations (RFC 9276 §3.2: insecure, and nothing is hashed);
// ok is false when the NSEC3 proof may go on.
func (p *proofs) noNSEC3(what string) (pr proof, ok bool) {
	switch {
	case p.n3 == nil:
		return noProof("no NSEC or NSEC3 proves that %s", what), true
	case p.n3.iter > MaxNSEC3Iterations:
		return proof{proofInsecure, fmt.Sprintf("NSEC3 with %d iterations, above the limit of %d (RFC 9276)", p.n3.iter, MaxNSEC3Iterations)}, true
	}
	return proof{}, false
}

func noProof(format string, args ...any) proof {
	return proof{kind: proofNone, reason: fmt.Sprintf(format, args...)}
}

// --- NSEC (RFC 4035 §5.4) ---

// covers reports whether n proves that name does not exist: name sorts
// strictly between n's owner and next name (the last NSEC of a zone wraps
// to its apex).
func covers(n *dns.NSEC, name string) bool {
	owner, next := canonical(n.Hdr.Name), canonical(n.NextDomain)
	if compareNames(owner, name) >= 0 {
		return false
	}
	if compareNames(owner, next) < 0 {
		return compareNames(name, next) < 0
	}
	return under(next, name)
}

// closestEncloser is the longest ancestor of name that the covering NSEC
// shows to exist: an ancestor of its owner or next name.
func closestEncloserNSEC(n *dns.NSEC, name string) string {
	owner, next := canonical(n.Hdr.Name), canonical(n.NextDomain)
	for a := parent(name); ; a = parent(a) {
		if under(a, owner) || under(a, next) || a == "." {
			return a
		}
	}
}

func wildcardOf(ce string) string {
	if ce == "." {
		return "*."
	}
	return "*." + ce
}

func (p *proofs) nsecCovering(name string) *dns.NSEC {
	for _, n := range p.nsec {
		owner := canonical(n.Hdr.Name)
		if under(p.zone, owner) && covers(n, name) && !(strictlyUnder(owner, name) && cutAbove(n.TypeBitMap)) {
			return n
		}
	}
	return nil
}

// cutAbove reports whether a bitmap marks a delegation (NS without SOA) or
// a DNAME: the parent's NSEC or NSEC3 there proves nothing about the names
// below it, which belong to another zone or are redirected (RFC 6840 §4.1,
// RFC 5155 §8.3).
func cutAbove(bitmap []uint16) bool {
	return hasType(bitmap, dns.TypeNS) && !hasType(bitmap, dns.TypeSOA) || hasType(bitmap, dns.TypeDNAME)
}

// parentSide reports whether a bitmap at a name is the parent's side of a
// delegation (NS without SOA), which proves the absence of no type but DS
// there: the child's records are in the child zone (RFC 6840 §4.1, RFC
// 5155 §8.9).
func parentSide(bitmap []uint16, qtype uint16) bool {
	return qtype != dns.TypeDS && hasType(bitmap, dns.TypeNS) && !hasType(bitmap, dns.TypeSOA)
}

func (p *proofs) nsecAt(name string) *dns.NSEC {
	for _, n := range p.nsec {
		if canonical(n.Hdr.Name) == name {
			return n
		}
	}
	return nil
}

// --- NSEC3 (RFC 5155 §8) ---

func (p *proofs) hashOf(name string) (string, error) {
	if h, ok := p.hash[name]; ok {
		return h, nil
	}
	if !take(&p.w.hashes) {
		return "", errBudget
	}
	p.w.hashed.Add(1)
	h := dns.HashName(name, dns.SHA1, p.n3.iter, p.n3.salt)
	p.hash[name] = h
	return h, nil
}

func ownerHash(r *dns.NSEC3) string {
	i := strings.IndexByte(r.Hdr.Name, '.')
	if i < 0 {
		return strings.ToUpper(r.Hdr.Name)
	}
	return strings.ToUpper(r.Hdr.Name[:i])
}

func (p *proofs) n3Match(name string) (*dns.NSEC3, error) {
	h, err := p.hashOf(name)
	if err != nil {
		return nil, err
	}
	for _, r := range p.nsec3 {
		if ownerHash(r) == h {
			return r, nil
		}
	}
	return nil, nil
}

func (p *proofs) n3Cover(name string) (*dns.NSEC3, error) {
	h, err := p.hashOf(name)
	if err != nil {
		return nil, err
	}
	for _, r := range p.nsec3 {
		o, n := ownerHash(r), strings.ToUpper(r.NextDomain)
		switch {
		case o < n && o < h && h < n,
			o >= n && (h > o || h < n) && h != o:
			return r, nil
		}
	}
	return nil, nil
}

// n3ClosestEncloser is RFC 5155 §8.3's closest encloser proof for name:
// the closest encloser, and the NSEC3 covering the next closer name; ""
// when there is no proof.
func (p *proofs) n3ClosestEncloser(name string) (string, *dns.NSEC3, error) {
	child := name
	for ce := parent(name); under(p.zone, ce); ce = parent(ce) {
		m, err := p.n3Match(ce)
		if err != nil {
			return "", nil, err
		}
		if m != nil {
			if cutAbove(m.TypeBitMap) {
				return "", nil, nil
			}
			nc, err := p.n3Cover(child)
			if err != nil || nc == nil {
				return "", nil, err
			}
			return ce, nc, nil
		}
		if ce == p.zone || ce == "." {
			break
		}
		child = ce
	}
	return "", nil, nil
}

func optOut(r *dns.NSEC3) bool { return r.Flags&1 != 0 }

// --- the proofs ---

// nameError proves an NXDOMAIN for name (RFC 4035 §5.4, RFC 5155 §8.4).
func (p *proofs) nameError(name string) (proof, error) {
	if n := p.nsecCovering(name); n != nil {
		ce := closestEncloserNSEC(n, name)
		wc := wildcardOf(ce)
		if p.nsecCovering(wc) != nil {
			return proof{kind: proofSecure}, nil
		}
		return noProof("no NSEC proves that %s does not exist", wc), nil
	}
	if pr, done := p.noNSEC3(name + " does not exist"); done {
		return pr, nil
	}
	ce, nc, err := p.n3ClosestEncloser(name)
	if err != nil || ce == "" {
		return noProof("no NSEC3 closest-encloser proof for %s", name), err
	}
	wc, err := p.n3Cover(wildcardOf(ce))
	if err != nil || wc == nil {
		return noProof("no NSEC3 proves that %s does not exist", wildcardOf(ce)), err
	}
	if optOut(nc) {
		return proof{proofInsecure, "NSEC3 opt-out span covers " + name}, nil
	}
	return proof{kind: proofSecure}, nil
}

// noData proves that name has no qtype records (RFC 4035 §5.4, RFC 5155
// §8.5–8.7), wildcard and empty non-terminal cases included.
func (p *proofs) noData(name string, qtype uint16) (proof, error) {
	if n := p.nsecAt(name); n != nil {
		if hasType(n.TypeBitMap, qtype) || hasType(n.TypeBitMap, dns.TypeCNAME) {
			return noProof("the NSEC at %s lists %s", name, dns.TypeToString[qtype]), nil
		}
		if qtype == dns.TypeDS && hasType(n.TypeBitMap, dns.TypeSOA) && name != "." {
			return noProof("the NSEC at %s is the child zone's, not the parent's", name), nil
		}
		if parentSide(n.TypeBitMap, qtype) {
			return noProof("the NSEC at %s is the parent's at a delegation, no proof for %s", name, dns.TypeToString[qtype]), nil
		}
		return proof{kind: proofSecure}, nil
	}
	if n := p.nsecCovering(name); n != nil {
		if next := canonical(n.NextDomain); strictlyUnder(name, next) {
			return proof{kind: proofSecure}, nil // an empty non-terminal
		}
		ce := closestEncloserNSEC(n, name)
		if w := p.nsecAt(wildcardOf(ce)); w != nil && !hasType(w.TypeBitMap, qtype) && !hasType(w.TypeBitMap, dns.TypeCNAME) {
			return proof{kind: proofSecure}, nil
		}
	}
	if pr, done := p.noNSEC3(name + " has no " + dns.TypeToString[qtype]); done {
		return pr, nil
	}
	m, err := p.n3Match(name)
	if err != nil {
		return proof{}, err
	}
	if m != nil {
		if hasType(m.TypeBitMap, qtype) || hasType(m.TypeBitMap, dns.TypeCNAME) {
			return noProof("the NSEC3 of %s lists %s", name, dns.TypeToString[qtype]), nil
		}
		if qtype == dns.TypeDS && hasType(m.TypeBitMap, dns.TypeSOA) && name != "." {
			return noProof("the NSEC3 of %s is the child zone's, not the parent's", name), nil
		}
		if parentSide(m.TypeBitMap, qtype) {
			return noProof("the NSEC3 of %s is the parent's at a delegation, no proof for %s", name, dns.TypeToString[qtype]), nil
		}
		return proof{kind: proofSecure}, nil
	}
	ce, nc, err := p.n3ClosestEncloser(name)
	if err != nil || ce == "" {
		return noProof("no NSEC3 proves that %s has no %s", name, dns.TypeToString[qtype]), err
	}
	if qtype == dns.TypeDS && optOut(nc) {
		return proof{proofInsecure, "NSEC3 opt-out span covers " + name}, nil
	}
	wm, err := p.n3Match(wildcardOf(ce))
	if err != nil {
		return proof{}, err
	}
	if wm != nil && !hasType(wm.TypeBitMap, qtype) && !hasType(wm.TypeBitMap, dns.TypeCNAME) {
		return proof{kind: proofSecure}, nil
	}
	return noProof("no NSEC3 proves that %s has no %s", name, dns.TypeToString[qtype]), nil
}

// dsDenial proves what a DS lookup's negative answer says of name: an
// unsigned delegation (insecure), no zone cut at all, or nothing.
func (p *proofs) dsDenial(name string) (proof, error) {
	if n := p.nsecAt(name); n != nil {
		return cutFromBitmap(name, n.TypeBitMap), nil
	}
	if p.nsecCovering(name) != nil {
		return proof{kind: proofNotCut}, nil
	}
	if pr, done := p.noNSEC3(name + " has no DS"); done {
		return pr, nil
	}
	m, err := p.n3Match(name)
	if err != nil {
		return proof{}, err
	}
	if m != nil {
		return cutFromBitmap(name, m.TypeBitMap), nil
	}
	ce, nc, err := p.n3ClosestEncloser(name)
	if err != nil || ce == "" {
		return noProof("no NSEC3 proves that %s has no DS", name), err
	}
	if optOut(nc) {
		return proof{proofInsecure, "NSEC3 opt-out span covers the delegation " + name}, nil
	}
	return proof{kind: proofNotCut}, nil
}

func cutFromBitmap(name string, bitmap []uint16) proof {
	switch {
	case hasType(bitmap, dns.TypeDS):
		return noProof("the denial of %s DS lists DS", name)
	case hasType(bitmap, dns.TypeSOA):
		return noProof("the denial of %s DS is the child zone's, not the parent's", name)
	case hasType(bitmap, dns.TypeNS):
		return proof{proofInsecure, "delegation to " + name + " proven to have no DS"}
	}
	return proof{kind: proofNotCut}
}

// wildcard proves that name, answered from a wildcard whose RRSIG counts
// sigLabels labels, does not exist itself (RFC 4035 §5.3.4, RFC 5155 §8.8).
func (p *proofs) wildcard(name string, sigLabels int) (proof, error) {
	// The covering NSEC must also show that the closest encloser is the
	// wildcard's parent: one whose owner is a closer ancestor of name
	// proves that ancestor exists, and so that this wildcard could not
	// have answered.
	if n := p.nsecCovering(name); n != nil && closestEncloserNSEC(n, name) == suffix(name, sigLabels) {
		return proof{kind: proofSecure}, nil
	}
	if pr, done := p.noNSEC3(name + ", answered from a wildcard, does not exist"); done {
		return pr, nil
	}
	nc := suffix(name, sigLabels+1)
	c, err := p.n3Cover(nc)
	if err != nil || c == nil {
		return noProof("no NSEC3 proves that %s, answered from a wildcard, does not exist", name), err
	}
	return proof{kind: proofSecure}, nil
}

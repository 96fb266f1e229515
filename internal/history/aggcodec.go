package history

import (
	"encoding/binary"
	"errors"
	"slices"
)

// The stored form of an Agg: a version byte, the exact counts, then the
// capped per-key maps. An overview that needs only a bucket's counts (the
// series of a long range) stops before the maps, which are most of the
// bytes and almost all of the decoding time.
const aggVersion = 2

var errCorruptAgg = errors.New("history: corrupt bucket")

func (a *Agg) encode() []byte {
	b := []byte{aggVersion}
	b = binary.AppendUvarint(b, uint64(a.Total))
	b = binary.AppendUvarint(b, uint64(a.DurUS))
	b = binary.AppendUvarint(b, uint64(len(a.Latency)))
	for _, n := range a.Latency {
		b = binary.AppendUvarint(b, uint64(n))
	}
	b = appendCounts(b, a.Sources)
	b = appendCounts(b, a.Rcodes)
	b = appendCounts(b, a.Cache)
	b = appendCounts(b, a.Other)
	b = binary.AppendUvarint(b, uint64(len(a.Upstreams)))
	for _, k := range sortedKeys(a.Upstreams) {
		u := a.Upstreams[k]
		b = appendStr(b, k)
		b = binary.AppendUvarint(b, uint64(u.N))
		b = binary.AppendUvarint(b, uint64(u.DurUS))
	}
	// The per-key maps, last.
	b = appendCounts(b, a.Clients)
	b = binary.AppendUvarint(b, uint64(len(a.ClientTag)))
	for _, k := range sortedKeys(a.ClientTag) {
		b = appendStr(b, k)
		b = appendStr(b, a.ClientTag[k])
	}
	b = appendCounts(b, a.Names)
	b = appendCounts(b, a.Blocked)
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a stable encoding: the same bucket makes the same bytes
	return keys
}

func appendCounts(b []byte, m map[string]int64) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	for _, k := range sortedKeys(m) {
		b = appendStr(b, k)
		b = binary.AppendUvarint(b, uint64(m[k]))
	}
	return b
}

// maxAggKeys bounds a decoded map: above any cap, so a corrupt length
// cannot allocate without bound.
const maxAggKeys = 1 << 16

func (d *decoder) counts() map[string]int64 {
	n := d.uvarint()
	if n > maxAggKeys {
		d.err = errCorruptAgg
	}
	if d.err != nil || n == 0 {
		return nil
	}
	m := make(map[string]int64, n)
	for range n {
		k := string(d.bytes())
		m[k] = int64(d.uvarint())
	}
	return m
}

// decodeAgg decodes a stored bucket; countsOnly leaves the per-key maps
// out.
func decodeAgg(v []byte, cap int, countsOnly bool) (*Agg, error) {
	if len(v) == 0 || v[0] != aggVersion {
		return nil, errCorruptAgg
	}
	d := decoder{b: v[1:]}
	a := newAgg(cap)
	a.Total = int64(d.uvarint())
	a.DurUS = int64(d.uvarint())
	if n := d.uvarint(); n != uint64(len(a.Latency)) {
		return nil, errCorruptAgg
	}
	for i := range a.Latency {
		a.Latency[i] = int64(d.uvarint())
	}
	a.Sources, a.Rcodes, a.Cache, a.Other = d.counts(), d.counts(), d.counts(), d.counts()
	if n := d.uvarint(); n > 0 && n <= maxAggKeys {
		a.Upstreams = make(map[string]UpAgg, n)
		for range n {
			k := string(d.bytes())
			a.Upstreams[k] = UpAgg{N: int64(d.uvarint()), DurUS: int64(d.uvarint())}
		}
	}
	if !countsOnly {
		a.Clients = d.counts()
		if n := d.uvarint(); n > 0 && n <= maxAggKeys {
			a.ClientTag = make(map[string]string, n)
			for range n {
				k := string(d.bytes())
				a.ClientTag[k] = string(d.bytes())
			}
		}
		a.Names, a.Blocked = d.counts(), d.counts()
	}
	if d.err != nil {
		return nil, d.err
	}
	return a, nil
}

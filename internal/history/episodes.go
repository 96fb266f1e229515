package history

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/nxdns/nxdns/internal/episodes"
)

// The upstreams' ended backoff episodes (internal/episodes) live in the
// history's store too, in a bucket of their own, so the upstreams page
// shows the last day's outages after a restart. They are buffered like
// query events and written in the same flush; the age budget deletes
// them with the rows (by their end), and they are too few (a few dozen
// bytes each, at most a few hundred a day) for the byte budget to matter.

var _ episodes.Store = (*History)(nil)

const episodeVersion = 1

// SaveEpisode buffers an ended episode for the next flush (episodes.Store).
// It never blocks; past MaxPending buffered episodes it drops the episode
// and counts it with the dropped events.
func (h *History) SaveEpisode(e episodes.Episode) {
	k, v := episodeKey(e), encodeEpisode(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pendingEps) >= h.opts.MaxPending {
		h.dropped.Add(1)
		return
	}
	h.pendingEps = append(h.pendingEps, buffered{key: k, val: v})
}

// RecentEpisodes returns the last n stored episodes, the latest ended last
// (episodes.Store), and those still buffered.
func (h *History) RecentEpisodes(n int) ([]episodes.Episode, error) {
	var out []episodes.Episode
	err := h.view(func(tx kvTx) error {
		b := tx.bucket(bucketEpisodes)
		if b == nil {
			return nil // a file written before episodes were kept
		}
		c := b.cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			if e, ok := decodeEpisode(k, v); ok {
				out = append(out, e)
			}
		}
		return nil
	})
	slices.Reverse(out)
	h.mu.Lock()
	for _, b := range slices.Concat(h.inflightEps, h.pendingEps) {
		if e, ok := decodeEpisode(b.key, b.val); ok {
			out = append(out, e)
		}
	}
	h.mu.Unlock()
	return out[max(len(out)-n, 0):], err
}

// writeEpisodes puts batch in the episodes bucket (inside a flush's
// transaction).
func writeEpisodes(tx kvTx, batch []buffered) error {
	b := tx.bucket(bucketEpisodes)
	for _, e := range batch {
		if err := b.put(e.key, e.val); err != nil {
			return err
		}
	}
	return nil
}

// episodeKey orders episodes by their end, and keeps two upstreams that
// recovered in the same nanosecond apart by a hash of the URL.
func episodeKey(e episodes.Episode) []byte {
	f := fnv.New32a()
	f.Write([]byte(e.Upstream))
	return rowKey(e.End, f.Sum32())
}

func encodeEpisode(e episodes.Episode) []byte {
	b := []byte{episodeVersion}
	b = binary.AppendVarint(b, e.Start.UnixNano())
	b = appendStr(b, e.Upstream)
	b = appendStr(b, e.Cause)
	b = appendStr(b, e.Detail)
	return binary.AppendUvarint(b, uint64(max(e.Failures, 0)))
}

func decodeEpisode(k, v []byte) (episodes.Episode, bool) {
	if len(k) != keyLen || len(v) == 0 || v[0] != episodeVersion {
		return episodes.Episode{}, false
	}
	d := decoder{b: v[1:]}
	e := episodes.Episode{End: keyTime(k), Start: time.Unix(0, d.varint())}
	e.Upstream = string(d.bytes())
	e.Cause = string(d.bytes())
	e.Detail = string(d.bytes())
	e.Failures = int(min(d.uvarint(), math.MaxInt32)) // an int on every architecture: 1<<31 was negative on 32-bit
	return e, d.err == nil
}

// Package peers keeps two nxdns's dashboard state in agreement
// (docs/how-to/two-pis.md, "Replication"): the names allowed, the pauses,
// the groups' service and safe-search switches, the acknowledged devices
// and the dashboard's DNSSEC negative trust anchors, changed on either, end
// the same on both, with no change lost while one is down.
//
// The state is a last-writer-wins map: every key (filter's replication
// keys) holds its latest value and the stamp of the change that set it.
// A stamp is a hybrid logical clock reading (wall milliseconds, a counter,
// the node's id): the later stamp wins, the node id breaks a tie, so two
// nodes that have seen the same changes hold the same state whatever order
// they saw them in. The clock never goes back and moves past every stamp
// it receives, so a change made after seeing another wins over it even
// when the other node's clock runs ahead.
//
// Each node pulls the whole state of each peer every pullInterval (a
// household's is a few hundred entries; at most maxEntries) and merges it; both pull, so
// changes flow both ways. The map is kept in the state directory, so a
// node down for a day gives and takes every change when it is back.
package peers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// Files under filter.state_dir, and bounds.
const (
	StateFile    = "peer-state.json"
	NodeFile     = "peer-node-id"
	maxStateFile = 32 << 20 // maxEntries of the largest entries (maxKey, maxValue, maxNode) come to under 20 MB
	// maxEntries: the allow set's 10 000 names and their removals, the
	// pauses, the devices' 4 096 acknowledgements, the 1 000 NTAs and the
	// group switches, with room to spare.
	maxEntries = 40_000
	// maxKey, maxValue and maxNode bound one entry a peer sends: a key is
	// a prefix and a name (at most 253 bytes), a value "1" or an RFC 3339
	// time, a node id 16 hex digits. Past them an entry is not taken.
	maxKey       = 300
	maxValue     = 64
	maxNode      = 64
	pullInterval = 5 * time.Second
	pullTimeout  = 10 * time.Second
	// InSyncWithin: a peer last pulled longer ago than this is shown as
	// not in sync, whatever its digest said then.
	InSyncWithin = 3 * pullInterval
)

// Stamp is a hybrid logical clock reading.
type Stamp struct {
	Wall int64  `json:"wall"` // unix milliseconds
	Seq  uint32 `json:"seq"`
	Node string `json:"node"`
}

// After reports whether s is later than o: wall, then counter, then node.
func (s Stamp) After(o Stamp) bool {
	if s.Wall != o.Wall {
		return s.Wall > o.Wall
	}
	if s.Seq != o.Seq {
		return s.Seq > o.Seq
	}
	return s.Node > o.Node
}

// Entry is one key's latest value.
type Entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Stamp Stamp  `json:"stamp"`
}

// State is what GET /api/peers/state answers and the state file holds.
type State struct {
	Node    string  `json:"node"`
	Digest  string  `json:"digest"` // of the keys and values: equal digests, equal state
	Entries []Entry `json:"entries"`
}

// Peer is one [[peers]] entry, its token read.
type Peer struct {
	URL   string
	Token string
}

// PeerStatus is a peer as the dashboard shows it.
type PeerStatus struct {
	URL      string    `json:"url"`
	LastPull time.Time `json:"last_pull,omitzero"` // the last good pull
	Error    string    `json:"error,omitempty"`    // why the last pull failed
	InSync   bool      `json:"in_sync"`            // its state equalled ours after the last pull, recently
	Node     string    `json:"node,omitempty"`
	Pulls    uint64    `json:"pulls"`    // good pulls
	Failures uint64    `json:"failures"` // pulls that failed: down, slow, refused, not nxdns
	Changes  uint64    `json:"changes"`  // changes taken from it
}

// StatusAnswer is what GET /api/peers answers.
type StatusAnswer struct {
	Node  string       `json:"node"`
	Peers []PeerStatus `json:"peers"`
}

// Store is this node's replicated state.
type Store struct {
	dir   string
	node  string
	apply func(key, value string) bool // applies a peer's change here (the filter's or the devices' ApplyReplicated)
	now   func() time.Time
	log   *zap.Logger

	mu      sync.Mutex
	clock   Stamp
	entries map[string]Entry
	status  map[string]*PeerStatus
}

// Open loads the state of dir (filter.state_dir), creating the node's id on
// first use. apply is called for each change a peer's state brings.
func Open(dir string, apply func(key, value string) bool, log *zap.Logger) (*Store, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Store{dir: dir, apply: apply, now: time.Now, log: log.Named("peers"), entries: map[string]Entry{}, status: map[string]*PeerStatus{}}
	id, err := safefile.ReadFile(filepath.Join(dir, NodeFile), 64)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b := make([]byte, 8)
		rand.Read(b)
		id = []byte(hex.EncodeToString(b))
		if err := safefile.WriteFile(filepath.Join(dir, NodeFile), id, 0o600); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	s.node = strings.TrimSpace(string(id))
	b, err := safefile.ReadFile(filepath.Join(dir, StateFile), maxStateFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		var st struct {
			Clock   Stamp   `json:"clock"`
			Entries []Entry `json:"entries"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
		}
		s.clock = st.Clock
		for _, e := range st.Entries {
			s.entries[e.Key] = e
		}
	}
	return s, nil
}

// Node is this node's id.
func (s *Store) Node() string { return s.node }

// tick is the clock's next reading; under mu.
func (s *Store) tick() Stamp {
	wall := s.now().UnixMilli()
	if wall > s.clock.Wall {
		s.clock = Stamp{Wall: wall, Node: s.node}
	} else if s.clock.Seq == math.MaxUint32 {
		// The counter at its top (only a lying peer's stamp puts it
		// there): the next millisecond, rather than wrapping round to a
		// stamp earlier than one already seen.
		s.clock = Stamp{Wall: s.clock.Wall + 1, Node: s.node}
	} else {
		s.clock = Stamp{Wall: s.clock.Wall, Seq: s.clock.Seq + 1, Node: s.node}
	}
	return s.clock
}

// Local records a change made here (filter.Engine.OnChange).
func (s *Store) Local(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[key]; !ok && len(s.entries) >= maxEntries {
		s.log.Warn("replicated state full: change kept here only", zap.String("key", key))
		return
	}
	if len(key) > maxKey || len(value) > maxValue {
		// A [[filter.groups]] name of hundreds of bytes: a peer would not take it.
		s.log.Warn("change too long to replicate: kept here only", zap.Int("key_bytes", len(key)))
		return
	}
	s.entries[key] = Entry{Key: key, Value: value, Stamp: s.tick()}
	s.saveLocked()
}

// Merge takes a peer's entries: each that is later than ours wins and is
// applied; the clock moves past every stamp seen. It returns how many won.
func (s *Store) Merge(in []Entry) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	won := 0
	for _, e := range in {
		if len(e.Key) > maxKey || len(e.Value) > maxValue || len(e.Stamp.Node) > maxNode {
			continue // not an entry an nxdns makes: it would grow the state without bound
		}
		if e.Stamp.After(s.clock) {
			s.clock = Stamp{Wall: e.Stamp.Wall, Seq: e.Stamp.Seq, Node: s.node}
		}
		cur, ok := s.entries[e.Key]
		if ok && !e.Stamp.After(cur.Stamp) {
			continue
		}
		if !ok && len(s.entries) >= maxEntries {
			continue
		}
		if !s.apply(e.Key, e.Value) {
			continue // a key this node does not understand, or garbage
		}
		s.entries[e.Key] = e
		won++
	}
	if won > 0 {
		s.saveLocked()
	}
	return won
}

// State is the whole map, sorted by key, with its digest.
func (s *Store) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}

func (s *Store) stateLocked() State {
	st := State{Node: s.node, Entries: make([]Entry, 0, len(s.entries))}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(s.entries)) {
		e := s.entries[k]
		st.Entries = append(st.Entries, e)
		fmt.Fprintf(h, "%q=%q\n", e.Key, e.Value)
	}
	st.Digest = hex.EncodeToString(h.Sum(nil))
	return st
}

// saveLocked writes the map (atomically); a failure is logged, the state
// in memory still applies. Under mu.
func (s *Store) saveLocked() {
	st := s.stateLocked()
	b, err := json.Marshal(struct {
		Clock   Stamp   `json:"clock"`
		Entries []Entry `json:"entries"`
	}{s.clock, st.Entries})
	if err == nil {
		err = safefile.WriteFile(filepath.Join(s.dir, StateFile), b, 0o600)
	}
	if err != nil {
		s.log.Warn("replicated state not saved; a restart would lose the latest changes", zap.Error(err))
	}
}

// Handler serves GET /api/peers/state: this node's whole state.
func (s *Store) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(s.State())
	})
}

// StatusHandler serves GET /api/peers: each peer and whether it is in sync.
func (s *Store) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(StatusAnswer{s.node, s.Status()})
	})
}

// Status is each peer's last pull.
func (s *Store) Status() []PeerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []PeerStatus{}
	now := s.now()
	for _, u := range slices.Sorted(maps.Keys(s.status)) {
		p := *s.status[u]
		p.InSync = p.InSync && now.Sub(p.LastPull) < InSyncWithin
		out = append(out, p)
	}
	return out
}

// Run pulls from every peer every pullInterval until ctx ends.
func (s *Store) Run(ctx context.Context, peers []Peer) {
	client := &http.Client{Timeout: pullTimeout}
	s.mu.Lock()
	for _, p := range peers {
		s.status[p.URL] = &PeerStatus{URL: p.URL}
	}
	s.mu.Unlock()
	t := time.NewTicker(pullInterval)
	defer t.Stop()
	for {
		for _, p := range peers {
			s.pull(ctx, client, p)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pull fetches one peer's state and merges it. A peer that is down, slow,
// or not nxdns (an answer that is not its state) leaves ours as it is.
func (s *Store) pull(ctx context.Context, c *http.Client, p Peer) {
	st, err := fetch(ctx, c, p)
	if err == nil && st.Node == s.node {
		// The same id means the same node or a copy of its state: a Pi
		// whose SD card was cloned from this one keeps this node's
		// peer-node-id, and the two would take each other for themselves.
		err = fmt.Errorf("the peer answers with this node's own id %s: its URL points back here, or its %s was copied from this node (an SD card cloned from this one: delete that file on one of them and restart it)", s.node, NodeFile)
	}
	s.mu.Lock()
	ps := s.status[p.URL]
	s.mu.Unlock()
	if err != nil {
		s.mu.Lock()
		if ps.Error == "" {
			s.log.Warn("peer unreachable; its changes and ours wait until it answers", zap.String("peer", p.URL), zap.Error(err))
		}
		ps.Error, ps.InSync = err.Error(), false
		ps.Failures++
		s.mu.Unlock()
		return
	}
	won := s.Merge(st.Entries)
	if won > 0 {
		s.log.Info("changes taken from a peer", zap.String("peer", p.URL), zap.Int("changes", won))
	}
	mine := s.State().Digest
	s.mu.Lock()
	if ps.Error != "" {
		s.log.Info("peer answering again", zap.String("peer", p.URL))
	}
	ps.Error, ps.LastPull, ps.Node = "", s.now(), st.Node
	ps.InSync = mine == st.Digest
	ps.Pulls++
	ps.Changes += uint64(won)
	s.mu.Unlock()
}

func fetch(ctx context.Context, c *http.Client, p Peer) (State, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.URL, "/")+"/api/peers/state", nil)
	if err != nil {
		return State{}, err
	}
	req.Header.Set("Authorization", "Bearer "+p.Token)
	resp, err := c.Do(req)
	if err != nil {
		return State{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return State{}, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var st State
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxStateFile)).Decode(&st); err != nil {
		return State{}, fmt.Errorf("not an nxdns peer state: %w", err)
	}
	if st.Node == "" || st.Digest == "" {
		return State{}, errors.New("not an nxdns peer state: no node or digest")
	}
	if len(st.Node) > maxNode {
		// The dashboard's Peers page shows it: a megabyte there is not an id.
		return State{}, fmt.Errorf("not an nxdns peer state: a node id of %d bytes", len(st.Node))
	}
	return st, nil
}

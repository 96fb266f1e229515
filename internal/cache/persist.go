package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// The cache file (dns.cache_file, docs/design.md#cache-file): the entries with their
// absolute times, so a restart starts warm and stale-capable.
//
//	magic "NXDNSCACHE" | version u16 | min_ttl u32 | max_ttl u32 | count u32
//	count × record | SHA-256 of everything before it
//	record: flags u8 | negative u8 | stored i64 | expires i64 | ttl u32 |
//	        upstream_ttl u32 | clamp, origin, source (u16 length + bytes) |
//	        answer (u32 length + DNS wire form)
//
// A file is used whole or not at all: a wrong magic or version (another
// program, another nxdns), a checksum that does not match (truncated,
// damaged) or a record that does not decode is one warning, and the cache
// starts empty. The key is rebuilt from the answer's own question, so a
// file can never make a name answer for another.
const (
	fileMagic   = "NXDNSCACHE"
	fileVersion = 1
	// maxFileBytes bounds what a load reads (docs/design.md#file-reads: every file read has a
	// size cap): a million entries of a few hundred bytes.
	maxFileBytes = 512 << 20
	// defaultSaveInterval is how often a changed cache is written while running:
	// a power cut loses at most this much warmth, and an SD card sees a
	// write every few minutes at most.
	defaultSaveInterval = 5 * time.Minute
)

var errBadFile = errors.New("not an nxdns cache file of this version")

// saveInterval is defaultSaveInterval; a variable only so a test can watch
// the periodic save without waiting minutes.
var saveInterval = defaultSaveInterval

// saver writes the cache file every saveInterval while it changes.
type saver struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	saved uint64 // c.changes at the last save; guarded by Cache.mu
}

func (s *saver) start(c *Cache) {
	s.stopc = make(chan struct{})
	interval := saveInterval // read here, not on the goroutine
	s.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				if err := c.save(); err != nil {
					c.log.Warn("cache file not written", zap.Error(err))
				}
			}
		}
	})
}

func (s *saver) stop() {
	close(s.stopc)
	s.wg.Wait()
}

// save writes the cache file if the cache changed since the last write:
// a temporary file beside it, synced, renamed over it, and the directory
// synced, so a crash leaves the old file or the new one, never half of one.
func (c *Cache) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.cur.Load()
	path := cur.set.file
	changes := c.changes.Load()
	if path == "" || cur.st == nil || changes == c.saver.saved {
		return nil
	}
	var buf bytes.Buffer
	n, err := encode(&buf, cur, c.now().UnixNano())
	if err != nil {
		return err
	}
	if err := writeAtomic(path, buf.Bytes()); err != nil {
		return err
	}
	c.saver.saved = changes
	c.log.Debug("cache file written", zap.String("file", path), zap.Int("entries", n))
	return nil
}

func encode(buf *bytes.Buffer, cur *current, now int64) (int, error) {
	type rec struct {
		k key
		e *entry
	}
	var recs []rec
	cur.st.each(func(k key, e *entry) {
		// A group pool's answers are not saved: the file's record rebuilds
		// its key from the answer's question alone, which would give them
		// to the main pool (docs/cache.md "The cache file").
		if k.pool != "" {
			return
		}
		if e.fresh(now) || e.usableStale(now, cur.set.staleMaxAge) {
			recs = append(recs, rec{k, e})
		}
	})
	buf.WriteString(fileMagic)
	w := func(v any) { _ = binary.Write(buf, binary.BigEndian, v) } // a bytes.Buffer write cannot fail
	w(uint16(fileVersion))
	w(cur.set.lim.min)
	w(cur.set.lim.max)
	w(uint32(len(recs)))
	str := func(s string) { w(uint16(len(s))); buf.WriteString(s) }
	for _, r := range recs {
		wire, err := r.e.msg.Pack()
		if err != nil {
			return 0, fmt.Errorf("cache entry %s: %w", r.k.name, err)
		}
		w(r.k.flags)
		w(b2u(r.e.negative))
		w(r.e.stored)
		w(r.e.expires)
		w(r.e.ttl)
		w(r.e.upTTL)
		str(r.e.clamp)
		str(r.e.origin)
		str(r.e.source)
		w(uint32(len(wire)))
		buf.Write(wire)
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	return len(recs), nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".nxdns-cache-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)                   // after a successful rename there is nothing to remove
	if err := f.Chmod(0o600); err != nil { // the names a household asks are private
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// load reads the cache file into cur's store. Any problem is one warning
// and an empty cache; a missing file is the normal first start.
func (c *Cache) load(cur *current, path string) {
	data, err := safefile.ReadFile(path, maxFileBytes) // a FIFO fails at once, never hangs start-up
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		var n int
		n, err = decode(data, cur, c.now().UnixNano())
		if err == nil {
			c.log.Info("cache loaded", zap.String("file", path), zap.Int("entries", n))
			return
		}
	}
	c.log.Warn("cache file ignored; starting with an empty cache", zap.String("file", path), zap.Error(err))
}

// decode checks the whole file, then stores its usable entries: those not
// past their stale age now.
func decode(data []byte, cur *current, now int64) (int, error) {
	if len(data) < len(fileMagic)+2+12+sha256.Size || string(data[:len(fileMagic)]) != fileMagic {
		return 0, errBadFile
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	r := bytes.NewReader(body[len(fileMagic):])
	var version uint16
	var minTTL, maxTTL, count uint32
	for _, v := range []any{&version, &minTTL, &maxTTL, &count} {
		_ = binary.Read(r, binary.BigEndian, v) // length checked above
	}
	if version != fileVersion {
		return 0, fmt.Errorf("%w (version %d, want %d)", errBadFile, version, fileVersion)
	}
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return 0, errors.New("checksum mismatch: the file is truncated or damaged")
	}
	if minTTL != cur.set.lim.min || maxTTL != cur.set.lim.max {
		return 0, errors.New("written under other dns.cache_min_ttl/cache_max_ttl values")
	}
	type rec struct {
		k key
		e *entry
	}
	// In uint64: int(count) is negative on 32-bit past 1<<31, and make
	// would panic on a file whose checksum is right but whose count is not.
	recs := make([]rec, 0, int(min(uint64(count), uint64(cur.st.limit))))
	for i := range count {
		k, e, err := decodeRecord(r)
		if err != nil {
			return 0, fmt.Errorf("record %d: %w", i, err)
		}
		if e.fresh(now) || e.usableStale(now, cur.set.staleMaxAge) {
			recs = append(recs, rec{k, e})
		}
	}
	if r.Len() != 0 {
		return 0, fmt.Errorf("%d bytes after the last record", r.Len())
	}
	for _, x := range recs {
		cur.st.put(x.k, x.e)
	}
	return len(recs), nil
}

func decodeRecord(r *bytes.Reader) (key, *entry, error) {
	var k key
	e := &entry{}
	var neg uint8
	for _, v := range []any{&k.flags, &neg, &e.stored, &e.expires, &e.ttl, &e.upTTL} {
		if err := binary.Read(r, binary.BigEndian, v); err != nil {
			return k, nil, err
		}
	}
	e.negative = neg == 1
	for _, s := range []*string{&e.clamp, &e.origin, &e.source} {
		var n uint16
		if err := binary.Read(r, binary.BigEndian, &n); err != nil {
			return k, nil, err
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return k, nil, err
		}
		*s = string(b)
	}
	var n uint32
	if err := binary.Read(r, binary.BigEndian, &n); err != nil {
		return k, nil, err
	}
	if int64(n) > int64(r.Len()) || n > dns.MaxMsgSize {
		return k, nil, errors.New("answer length beyond the file")
	}
	wire := make([]byte, n)
	_, _ = io.ReadFull(r, wire) // length checked
	m := &e.msg
	if err := m.Unpack(wire); err != nil {
		return k, nil, err
	}
	if len(m.Question) != 1 || k.flags&^(flagDO|flagCD) != 0 ||
		e.expires-e.stored != int64(e.ttl)*int64(time.Second) || e.ttl == 0 {
		return k, nil, errors.New("inconsistent record")
	}
	q := m.Question[0]
	k.name, k.qtype, k.qclass = strings.ToLower(q.Name), q.Qtype, q.Qclass
	e.setAnswer(k.name)
	return k, e, nil
}

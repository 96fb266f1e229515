//go:build bbolt

package main

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

func init() { candidate, open = "bbolt", openBolt }

type boltStore struct{ db *bolt.DB }

func openBolt(path string) (store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	return boltStore{db}, db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("rows")); return err })
}

func str(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readStr(b []byte) (string, []byte) {
	n, k := binary.Uvarint(b)
	return string(b[k : k+int(n)]), b[k+int(n):]
}

func (s boltStore) writeBatch(rows []row) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("rows"))
		b.FillPercent = 0.9
		for i, r := range rows {
			k := binary.BigEndian.AppendUint64(nil, uint64(r.ts))
			k = binary.BigEndian.AppendUint32(k, uint32(i))
			v := str(nil, r.name)
			v = str(v, r.client)
			v = binary.AppendUvarint(v, uint64(r.qtype))
			v = str(v, r.source)
			v = str(v, r.upstream)
			v = binary.AppendVarint(v, int64(r.rcode))
			v = binary.AppendUvarint(v, uint64(r.durUS))
			v = str(v, r.answer)
			if err := b.Put(k, v); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s boltStore) scan(limit int, match func(v []byte) bool) (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("rows")).Cursor()
		for k, v := c.Last(); k != nil && n < limit; k, v = c.Prev() {
			if match(v) {
				n++
			}
		}
		return nil
	})
	return n, err
}

func (s boltStore) search(sub string, limit int) (int, error) {
	needle := []byte(sub)
	return s.scan(limit, func(v []byte) bool {
		nl, k := binary.Uvarint(v)
		return bytes.Contains(v[k:k+int(nl)], needle)
	})
}

func (s boltStore) searchClient(client string, limit int) (int, error) {
	return s.scan(limit, func(v []byte) bool {
		_, rest := readStr(v)
		c, _ := readStr(rest)
		return c == client
	})
}

func (s boltStore) close() error { return s.db.Close() }

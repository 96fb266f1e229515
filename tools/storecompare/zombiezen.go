//go:build zombiezen

package main

import (
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

func init() { candidate, open = "zombiezen-sqlite", openZ }

type zStore struct{ c *sqlite.Conn }

func openZ(path string) (store, error) {
	c, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		return nil, err
	}
	if err := sqlitex.ExecuteTransient(c, `PRAGMA synchronous=FULL`, nil); err != nil {
		return nil, err
	}
	if err := sqlitex.ExecuteScript(c, `CREATE TABLE rows (ts INTEGER NOT NULL, client TEXT, name TEXT, qtype INTEGER, source TEXT, upstream TEXT, rcode INTEGER, dur_us INTEGER, answer TEXT);
CREATE INDEX rows_ts ON rows(ts);
CREATE INDEX rows_client_ts ON rows(client, ts);`, nil); err != nil {
		return nil, err
	}
	return zStore{c}, nil
}

func (s zStore) writeBatch(rows []row) (err error) {
	end := sqlitex.Transaction(s.c)
	defer end(&err)
	st := s.c.Prep(`INSERT INTO rows VALUES (?,?,?,?,?,?,?,?,?)`)
	for _, r := range rows {
		st.BindInt64(1, r.ts)
		st.BindText(2, r.client)
		st.BindText(3, r.name)
		st.BindInt64(4, int64(r.qtype))
		st.BindText(5, r.source)
		st.BindText(6, r.upstream)
		st.BindInt64(7, int64(r.rcode))
		st.BindInt64(8, r.durUS)
		st.BindText(9, r.answer)
		if _, err := st.Step(); err != nil {
			return err
		}
		if err := st.Reset(); err != nil {
			return err
		}
	}
	return nil
}

func (s zStore) count(q string, arg string, limit int) (int, error) {
	n := 0
	err := sqlitex.Execute(s.c, q, &sqlitex.ExecOptions{Args: []any{arg, limit}, ResultFunc: func(*sqlite.Stmt) error { n++; return nil }})
	return n, err
}

func (s zStore) search(sub string, limit int) (int, error) {
	return s.count(`SELECT ts, client, name, answer FROM rows WHERE instr(name, ?) > 0 ORDER BY ts DESC LIMIT ?`, sub, limit)
}

func (s zStore) searchClient(client string, limit int) (int, error) {
	return s.count(`SELECT ts, client, name, answer FROM rows WHERE client = ? ORDER BY ts DESC LIMIT ?`, client, limit)
}

func (s zStore) close() error { return s.c.Close() }

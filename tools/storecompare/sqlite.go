//go:build sqlite

package main

import (
	"database/sql"

	_ "modernc.org/sqlite"
)

func init() { candidate, open = "modernc-sqlite", openSQLite }

type sqlStore struct{ db *sql.DB }

const schema = `CREATE TABLE rows (ts INTEGER NOT NULL, client TEXT, name TEXT, qtype INTEGER, source TEXT, upstream TEXT, rcode INTEGER, dur_us INTEGER, answer TEXT);
CREATE INDEX rows_ts ON rows(ts);
CREATE INDEX rows_client_ts ON rows(client, ts);`

func openSQLite(path string) (store, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		return nil, err
	}
	return sqlStore{db}, nil
}

func (s sqlStore) writeBatch(rows []row) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	st, err := tx.Prepare(`INSERT INTO rows VALUES (?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		tx.Rollback()
		return err
	}
	for _, r := range rows {
		if _, err := st.Exec(r.ts, r.client, r.name, r.qtype, r.source, r.upstream, r.rcode, r.durUS, r.answer); err != nil {
			tx.Rollback()
			return err
		}
	}
	st.Close()
	return tx.Commit()
}

func (s sqlStore) count(q string, arg any, limit int) (int, error) {
	rs, err := s.db.Query(q, arg, limit)
	if err != nil {
		return 0, err
	}
	defer rs.Close()
	n := 0
	for rs.Next() {
		n++
	}
	return n, rs.Err()
}

func (s sqlStore) search(sub string, limit int) (int, error) {
	return s.count(`SELECT ts, client, name, answer FROM rows WHERE instr(name, ?) > 0 ORDER BY ts DESC LIMIT ?`, sub, limit)
}

func (s sqlStore) searchClient(client string, limit int) (int, error) {
	return s.count(`SELECT ts, client, name, answer FROM rows WHERE client = ? ORDER BY ts DESC LIMIT ?`, client, limit)
}

func (s sqlStore) close() error { return s.db.Close() }

package history

// The store is an ordered key-value store with a few buckets; kv is the seam
// between the history's logic (rows, buckets, budgets, searches) and the two
// places it can live: a bbolt file (history.path) or memory (no path). One
// implementation of every search and budget, whichever backs it.
type kv interface {
	// update runs fn in one write transaction; nothing of it is kept when fn
	// or the commit fails. written is what the commit wrote, in bytes (the
	// pages of a file, the values of memory).
	update(fn func(tx kvTx) error) (written int64, err error)
	// view runs fn in a read transaction that sees one consistent state.
	view(fn func(tx kvTx) error) error
	// used is how many bytes the data takes (for the byte budget): the
	// pages of a file, the resident memory of the memory store; size the
	// file's size on disk (0 in memory).
	used() (used, size int64)
	// rowCost is about what a row with a key and value of these lengths
	// adds to used (prune's estimate of how many rows free a byte count).
	rowCost(klen, vlen int) float64
	// setMaxBytes changes the byte bound of a store that enforces one
	// itself (the file's); called with no transaction running.
	setMaxBytes(n int64)
	close() error
}

type kvTx interface {
	bucket(name []byte) kvBucket
}

// kvBucket is one bucket. Values returned by get and the cursor are valid
// only inside the transaction; copy what outlives it.
type kvBucket interface {
	get(k []byte) []byte
	put(k, v []byte) error
	// deleteBefore deletes every key below end, at most limit of them, and
	// returns how many keys and bytes (key and value) it deleted.
	deleteBefore(end []byte, limit int) (n int, bytes int64, err error)
	cursor() kvCursor
}

// kvCursor walks a bucket in key order. Each method returns the key and
// value it lands on, nil at either end.
type kvCursor interface {
	First() ([]byte, []byte)
	Last() ([]byte, []byte)
	Seek(k []byte) ([]byte, []byte)
	Next() ([]byte, []byte)
	Prev() ([]byte, []byte)
}

// The buckets.
var (
	bucketRows   = []byte("rows")   // rowKey → appendRow
	bucketMinute = []byte("minute") // bucketKey(minute) → encoded aggregate
	bucketHour   = []byte("hour")   // bucketKey(hour) → encoded aggregate
	bucketDay    = []byte("day")    // bucketKey(UTC day) → encoded aggregate
	// bucketEpisodes: rowKey(end, hash of the URL) → encodeEpisode (episodes.go)
	bucketEpisodes = []byte("episodes")
	allBuckets     = [][]byte{bucketRows, bucketMinute, bucketHour, bucketDay, bucketEpisodes}
)

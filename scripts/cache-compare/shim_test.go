package cachecompare

// The cache's key and entry as store.go (copied in by cache-compare.sh)
// sees them.
type key struct {
	name   string
	qtype  uint16
	qclass uint16
	flags  uint8
}

type entry struct{ v [64]byte }

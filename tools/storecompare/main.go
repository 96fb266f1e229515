// Command storecompare measures the embedded pure-Go stores that could hold
// nxdns's query history (docs/history.md): the same rows written in
// batches of one durable transaction each, then the query log's searches.
// Build it with one tag (bbolt, sqlite or zombiezen) to measure that store
// alone, binary size included:
//
//	go run -tags bbolt . -dir /tmp/sc
//	GOARCH=arm64 CGO_ENABLED=0 go build -tags sqlite -o sc-arm64 .
//
// It is its own module so that the candidates not chosen never enter
// nxdns's go.mod.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// row is one stored query, the fields the history keeps.
type row struct {
	ts       int64 // unix nanoseconds
	client   string
	name     string
	qtype    int
	source   string
	upstream string
	rcode    int
	durUS    int64
	answer   string
}

// store is what each candidate implements.
type store interface {
	writeBatch(rows []row) error
	// search returns up to limit rows whose name contains sub, newest first.
	search(sub string, limit int) (int, error)
	// searchClient returns up to limit rows of a client, newest first.
	searchClient(client string, limit int) (int, error)
	close() error
}

var open func(path string) (store, error) // set by the tagged file
var candidate string

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the store file")
	batches := flag.Int("batches", 300, "batches of -batch rows")
	batch := flag.Int("batch", 1000, "rows per batch (a busy household's minute is ~100)")
	flag.Parse()
	if open == nil {
		fmt.Fprintln(os.Stderr, "build with -tags bbolt, sqlite or zombiezen")
		os.Exit(2)
	}
	path := filepath.Join(*dir, "storecompare-"+candidate)
	os.RemoveAll(path)
	defer os.RemoveAll(path)
	s, err := open(path)
	check(err)
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, 3000)
	for i := range names {
		names[i] = fmt.Sprintf("host%d.cdn%d.example.com.", i, i%97)
	}
	ts := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var durs []time.Duration
	for b := range *batches {
		rows := make([]row, *batch)
		for i := range rows {
			ts += int64(time.Second) // ~86 400 a day: a busy household
			rows[i] = row{ts: ts, client: fmt.Sprintf("192.168.1.%d", 10+rng.IntN(20)), name: names[rng.IntN(len(names))],
				qtype: 1, source: "pool", upstream: "tls://9.9.9.9:853", rcode: 0, durUS: int64(rng.IntN(80000)), answer: "A 192.0.2." + fmt.Sprint(rng.IntN(255))}
		}
		rows[len(rows)/2].name = fmt.Sprintf("rare%d.example.", b)
		t := time.Now()
		check(s.writeBatch(rows))
		durs = append(durs, time.Since(t))
	}
	n := *batches * *batch
	time.Sleep(0)
	size := dirSize(path)
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	fmt.Printf("%s: %d rows; write per batch of %d: median %v, p90 %v; %.0f bytes/row on disk\n",
		candidate, n, *batch, durs[len(durs)/2], durs[len(durs)*9/10], float64(size)/float64(n))
	for _, q := range []struct{ what, sub string }{{"common name (fills a page at once)", "cdn1"}, {"rare name (scans every row)", "rare1."}, {"no match (scans every row)", "nomatch"}} {
		t := time.Now()
		got, err := s.search(q.sub, 50)
		check(err)
		fmt.Printf("%s: search %s: %d rows in %v\n", candidate, q.what, got, time.Since(t))
	}
	t := time.Now()
	got, err := s.searchClient("192.168.1.11", 50)
	check(err)
	fmt.Printf("%s: search by client: %d rows in %v\n", candidate, got, time.Since(t))
	check(s.close())
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("%s: max RSS %d KiB\n", candidate, ru.Maxrss)
}

func dirSize(path string) int64 {
	var n int64
	filepath.Walk(filepath.Dir(path), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && len(p) >= len(path) && p[:len(path)] == path {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

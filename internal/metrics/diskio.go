package metrics

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var diskWritten = prometheus.NewDesc("nxdns_process_disk_written_bytes_total",
	"Bytes this process caused to be written to storage (write_bytes of /proc/self/io): the history, the cache file, the lists' copies. On an SD card, the wear nxdns adds.",
	nil, nil)

// diskIOCollector reads write_bytes from /proc/self/io at scrape time
// (Linux with task I/O accounting; elsewhere the series is absent). It
// counts what reached the block layer, after the page cache, so it is the
// wear figure of docs/performance.md's "SD card wear", not the bytes
// written(2).
type diskIOCollector struct{ path string }

func (diskIOCollector) Describe(ch chan<- *prometheus.Desc) { ch <- diskWritten }

func (c diskIOCollector) Collect(ch chan<- prometheus.Metric) {
	if v, ok := readWriteBytes(c.path); ok {
		send(ch, diskWritten, prometheus.CounterValue, float64(v))
	}
}

// readWriteBytes returns the write_bytes field of a /proc/PID/io file.
func readWriteBytes(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("write_bytes:")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

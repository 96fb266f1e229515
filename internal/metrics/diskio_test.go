package metrics

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDiskWritten_readsWriteBytes: the series is the write_bytes field of a
// /proc/PID/io file, not another of its counters (wchar counts writes to
// the page cache and pipes, which never wear a card).
func TestDiskWritten_readsWriteBytes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "io")
	io := "rchar: 100\nwchar: 5000\nsyscr: 3\nsyscw: 4\nread_bytes: 8192\nwrite_bytes: 12288\ncancelled_write_bytes: 0\n"
	if err := os.WriteFile(p, []byte(io), 0o600); err != nil {
		t.Fatal(err)
	}
	collect := func(path string) map[string]float64 {
		reg := prometheus.NewRegistry()
		reg.MustRegister(diskIOCollector{path})
		out := map[string]float64{}
		for name, mf := range gatherFrom(t, reg) {
			for _, m := range mf.GetMetric() {
				out[name] += m.GetCounter().GetValue()
			}
		}
		return out
	}
	if got := collect(p); got["nxdns_process_disk_written_bytes_total"] != 12288 || len(got) != 1 {
		t.Errorf("got %v, want nxdns_process_disk_written_bytes_total = 12288 (write_bytes)", got)
	}
	// No file (no task I/O accounting): no sample, no error.
	if got := collect(filepath.Join(t.TempDir(), "absent")); len(got) != 0 {
		t.Errorf("got %v without the file, want no sample", got)
	}
}

// TestDiskWritten_ownProcess: on Linux the registry New returns has the
// series, read from this process.
func TestDiskWritten_ownProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/io is Linux's")
	}
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no task I/O accounting here")
	}
	fams := gatherFrom(t, New(Sources{}))
	if _, ok := fams["nxdns_process_disk_written_bytes_total"]; !ok {
		t.Error("nxdns_process_disk_written_bytes_total missing from the registry")
	}
}

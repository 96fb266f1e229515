package config

import (
	"os"
	"path/filepath"
)

// PrefetchOn reports whether names asked again near expiry are refreshed
// in the background (dns.prefetch, default true).
func (d DNS) PrefetchOn() bool { return d.Prefetch == nil || *d.Prefetch }

// checkCacheFile: dns.cache_file is absolute (a service's working directory
// is nobody's choice) and, when it exists, a regular file. It may be
// missing, and so may its directory (the NixOS module's state directory is
// created when the service starts): the first save creates the file, and a
// save that fails is logged, never fatal.
func checkCacheFile(ps *Problems, path string) {
	if path == "" {
		return
	}
	if !filepath.IsAbs(path) {
		ps.add("dns.cache_file", CodeCacheFile, "%q is not an absolute path", path)
		return
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		ps.add("dns.cache_file", CodeCacheFile, "%q exists and is not a regular file", path)
	}
}

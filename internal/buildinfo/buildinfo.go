// Package buildinfo says which nxdns this is. Release builds (the Nix
// package, CI) stamp Version and Commit with -ldflags -X; a plain `go build`
// or `go run` falls back to what the Go toolchain recorded in the binary.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped at link time:
//
//	-X github.com/nxdns/nxdns/internal/buildinfo.Version=1.2.3
//	-X github.com/nxdns/nxdns/internal/buildinfo.Commit=abc1234
var (
	Version = ""
	Commit  = ""
)

// Info is the resolved identity of the running binary.
type Info struct {
	Version string // "devel" when neither stamped nor recorded
	Commit  string // "unknown" when neither stamped nor recorded
	Dirty   bool   // built from a tree with uncommitted changes (toolchain-recorded only)
	Go      string
}

// Get resolves the identity: link-time stamps win, then the module version
// and VCS data the toolchain embeds, then placeholders.
func Get() Info {
	info := Info{Version: Version, Commit: Commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.modified":
				info.Dirty = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if len(info.Commit) > 12 {
		info.Commit = info.Commit[:12]
	}
	return info
}

func (i Info) String() string {
	dirty := ""
	if i.Dirty {
		dirty = "+dirty"
	}
	return fmt.Sprintf("nxdns %s (commit %s%s, %s)", i.Version, i.Commit, dirty, i.Go)
}

package filter

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
)

// BlockFile is the file under filter.state_dir that keeps the names
// blocked from the dashboard (the query log's "block" action) across
// restarts, beside AllowFile and in the same format. It is part of the
// dashboard's layer over the configuration (docs/dashboard.md "Changes
// made here"): the configuration file is never rewritten, and the
// "changes made here" page shows the filter.block line that would make
// each name permanent.
//
// A name blocked here is blocked for every client and every group, like
// a filter.block rule, and answered as the lists answer
// (filter.block_response, EDE 15 naming list "dashboard"). Two things
// override it: a name allowed from the dashboard (the same page's other
// button), and a pause, as for every list. The configuration's allow
// rules do not: the household asked for this name to be blocked.
const BlockFile = "dashboard-block.txt"

// ErrBlockFull is what Block returns when MaxAllowed names are blocked.
var ErrBlockFull = fmt.Errorf("already %d names blocked from the dashboard: remove some first", MaxAllowed)

// useBlockFile points the runtime block set at stateDir's BlockFile.
func (e *Engine) useBlockFile(stateDir string) {
	path := ""
	if stateDir != "" {
		path = filepath.Join(stateDir, BlockFile)
	}
	n, err := e.block.use(path)
	if err != nil {
		e.log.Warn("names blocked from the dashboard not read or not saved", zap.Error(err))
	} else if n > 0 {
		e.log.Info("names blocked from the dashboard loaded", zap.String("file", path), zap.Int("names", n))
	}
}

// Block blocks name (and every name below it) for every client until
// Unblock; it returns the name as kept and whether it was new. The change
// applies even when it could not be saved (the error says so). At most
// MaxAllowed names: ErrAllowFull's sibling, ErrBlockFull, past that.
func (e *Engine) Block(name string) (string, bool, error) {
	n, ok := normalise(strings.TrimSpace(name), Subtree)
	if !ok {
		return "", false, errNotAName
	}
	added, err := e.block.add(n)
	if err == ErrAllowFull {
		return n, false, ErrBlockFull
	}
	if added {
		e.log.Info("name blocked from the dashboard", zap.String("name", n), zap.Error(err))
	}
	return n, added, err
}

// Unblock ends Block for name; it reports whether name was blocked.
func (e *Engine) Unblock(name string) (string, bool, error) {
	n, ok := normalise(strings.TrimSpace(name), Subtree)
	if !ok {
		return "", false, errNotAName
	}
	removed, err := e.block.remove(n)
	if removed {
		e.log.Info("name no longer blocked from the dashboard", zap.String("name", n), zap.Error(err))
	}
	return n, removed, err
}

// BlockedNames lists the names blocked from the dashboard, sorted.
func (e *Engine) BlockedNames() []string { return e.block.list() }

// Layer is the dashboard's layer over the configuration as kept in
// filter.state_dir (docs/dashboard.md "Changes made here"): what
// `nxdns check` reports beside the file it checks.
type Layer struct {
	Allowed, Blocked []string
	// Skipped counts the lines of the two files that are no name (a hand
	// edit gone wrong): they are left out, the rest still applies.
	Skipped int
}

// ReadLayer reads the layer from stateDir. Missing files are an empty
// layer; a file that cannot be read is an error naming it.
func ReadLayer(stateDir string) (Layer, error) {
	var l Layer
	if stateDir == "" {
		return l, nil
	}
	for _, f := range []struct {
		name string
		into *[]string
	}{{AllowFile, &l.Allowed}, {BlockFile, &l.Blocked}} {
		path := filepath.Join(stateDir, f.name)
		names, skipped, err := readNamesFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return l, fmt.Errorf("%s: %w", path, err)
		}
		*f.into, l.Skipped = names, l.Skipped+skipped
	}
	return l, nil
}

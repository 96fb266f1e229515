package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// API tokens (docs/dashboard.md, "API tokens"): what a script or Home
// Assistant holds instead of a browser session. A token is 256 random bits,
// shown once when it is made; the state directory keeps only its SHA-256.
//
// A fast hash is enough, and a slow one (bcrypt, argon2) would buy nothing:
// a slow hash protects a password a person chose, which a stolen hash lets
// an attacker guess offline from a small space. A token is drawn uniformly
// from 2^256 values, so whoever reads the file must still find a preimage
// of SHA-256, which no amount of guessing reaches; and a check costs a
// microsecond instead of a quarter second of a Pi's CPU per request.
const (
	// TokensFile is the file under filter.state_dir that keeps the tokens'
	// names, scopes and hashes.
	TokensFile = "api-tokens.json"
	// TokenPrefix starts every token, so a leaked one is recognisable (a
	// secret scanner, a log reviewer) and a password is never taken for one.
	TokenPrefix = "nxdns_"
	// MaxTokens bounds the live tokens, and maxRevoked the revoked ones
	// kept so that a request with one is told so (and counted under its
	// name): the file, the table and the metric's labels stay small.
	MaxTokens  = 32
	maxRevoked = 32
	// maxTokensFile bounds the file: 64 entries of some 200 bytes.
	maxTokensFile = 64 << 10
)

// Token scopes: read reaches the Private routes (stats, queries, export,
// health), control the Mutating ones too (pause, resume, allow, flush).
const (
	ScopeRead    = "read"
	ScopeControl = "control"
)

var tokenName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// TokenEntry is one token in TokensFile: never the token itself.
type TokenEntry struct {
	Name    string    `json:"name"`
	Scope   string    `json:"scope"`
	SHA256  string    `json:"sha256"` // hex of the SHA-256 of the whole token string
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"` // zero: never
	Revoked time.Time `json:"revoked,omitzero"` // zero: live
}

type tokensDoc struct {
	Tokens []TokenEntry `json:"tokens"`
}

func hashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// ReadTokens reads the tokens file in dir; a missing file has no tokens.
func ReadTokens(dir string) ([]TokenEntry, error) {
	b, err := safefile.ReadFile(filepath.Join(dir, TokensFile), maxTokensFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc tokensDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, TokensFile), err)
	}
	return doc.Tokens, nil
}

// editTokens changes the tokens file under an exclusive lock (a lock file
// beside it), so the CLI and the dashboard adding at once both land, and
// replaces it atomically (safefile.WriteFile) with mode 0600.
func editTokens(dir string, edit func([]TokenEntry) ([]TokenEntry, error)) error {
	if dir == "" {
		return errors.New("API tokens need filter.state_dir, where their hashes are kept")
	}
	lockPath := filepath.Join(dir, "."+TokensFile+".lock")
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := ownLikeDir(lockPath, dir); err != nil {
		return err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	cur, err := ReadTokens(dir)
	if err != nil {
		return err
	}
	next, err := edit(cur)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(tokensDoc{Tokens: next}, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, TokensFile)
	if err := safefile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return ownLikeDir(path, dir)
}

// ownLikeDir gives path the owner of dir when this process is root: `sudo
// nxdns token add` writes into the state directory of a service that runs
// as another user (the packaged units' DynamicUser), which must still be
// able to read the file it keeps at 0600.
func ownLikeDir(path, dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return os.Chown(path, int(st.Uid), int(st.Gid))
}

// AddToken makes a token named name with scope, valid for ttl (0: until
// revoked), records its hash in dir, and returns the token: the only time
// it is ever seen.
func AddToken(dir, name, scope string, ttl time.Duration, now time.Time) (string, error) {
	if !tokenName.MatchString(name) {
		return "", fmt.Errorf("token name %q: want 1 to 32 of a-z, 0-9, _ and -, starting with a letter or digit", name)
	}
	if scope != ScopeRead && scope != ScopeControl {
		return "", fmt.Errorf("scope %q: want %s or %s", scope, ScopeRead, ScopeControl)
	}
	if ttl < 0 {
		return "", errors.New("expiry: want a positive duration")
	}
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	token := TokenPrefix + hex.EncodeToString(b)
	err := editTokens(dir, func(cur []TokenEntry) ([]TokenEntry, error) {
		live := 0
		for _, t := range cur {
			if t.Name == name && t.Revoked.IsZero() {
				return nil, fmt.Errorf("a token named %q exists: revoke it first", name)
			}
			if t.Revoked.IsZero() {
				live++
			}
		}
		if live >= MaxTokens {
			return nil, fmt.Errorf("already %d tokens: revoke one first", MaxTokens)
		}
		// A revoked token of the same name goes: the name now means the new one.
		cur = slices.DeleteFunc(cur, func(t TokenEntry) bool { return t.Name == name })
		e := TokenEntry{Name: name, Scope: scope, SHA256: hashToken(token), Created: now.UTC().Truncate(time.Second)}
		if ttl > 0 {
			e.Expires = now.Add(ttl).UTC().Truncate(time.Second)
		}
		return append(cur, e), nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// RevokeToken revokes the live token named name in dir. Its hash stays
// (up to maxRevoked of them) so that a request with it is answered "revoked"
// and counted under its name.
func RevokeToken(dir, name string, now time.Time) error {
	return editTokens(dir, func(cur []TokenEntry) ([]TokenEntry, error) {
		i := slices.IndexFunc(cur, func(t TokenEntry) bool { return t.Name == name && t.Revoked.IsZero() })
		if i < 0 {
			return nil, fmt.Errorf("no live token named %q", name)
		}
		cur[i].Revoked = now.UTC().Truncate(time.Second)
		var revoked []int
		for j, t := range cur {
			if !t.Revoked.IsZero() {
				revoked = append(revoked, j)
			}
		}
		if len(revoked) > maxRevoked { // drop the oldest revocations
			slices.SortFunc(revoked, func(a, b int) int { return cur[a].Revoked.Compare(cur[b].Revoked) })
			drop := map[int]bool{}
			for _, j := range revoked[:len(revoked)-maxRevoked] {
				drop[j] = true
			}
			var kept []TokenEntry
			for j, t := range cur {
				if !drop[j] {
					kept = append(kept, t)
				}
			}
			cur = kept
		}
		return cur, nil
	})
}

// Token outcomes, the result label of nxdns_web_api_token_requests_total.
const (
	TokenOK         = "ok"
	TokenUnknown    = "unknown"    // no such token (counted under the name "unknown")
	TokenRevoked    = "revoked"    // revoked with nxdns token revoke or the dashboard
	TokenExpired    = "expired"    // past its --expires
	TokenScope      = "scope"      // a read token on a control route, or any token on a session-only one
	TokenPlainHTTP  = "plain_http" // sent over plain HTTP from a non-loopback address
	TokenUnreadable = "unreadable" // the tokens file cannot be read: every token is refused
)

// unknownTokenName is the counter name of a token that matches no entry.
const unknownTokenName = "unknown"

// maxCounted bounds the names counted: live and revoked tokens plus
// "unknown"; past it (names made and revoked in a loop) counts go to "other".
const maxCounted = 2*(MaxTokens+maxRevoked) + 1

// Tokens is the running side: the tokens file of the state directory,
// read again whenever it changes (its size, modification time or inode;
// one stat per token request), and the per-token counts. The App owns it,
// so counts outlive a reload and the endpoints it replaces.
type Tokens struct {
	mu     sync.Mutex
	dir    string
	stamp  fileStamp
	byHash map[string]TokenEntry
	err    error // why the file could not be read; every token is refused meanwhile
	log    *zap.Logger
	counts map[[2]string]uint64
	// overHTTP accepts a token over plain HTTP from a non-loopback client
	// (web.tokens_over_http); otherwise such a request is refused, since
	// anyone on the LAN's path could have read the token and can replay it.
	overHTTP atomic.Bool
}

// fileStamp tells whether the tokens file changed since it was read. The
// change time is in it because the fix for a file the service cannot open
// is chmod or chown, which changes nothing else: without it an unreadable
// file stayed refused until a restart.
type fileStamp struct {
	ok    bool
	size  int64
	mtime time.Time
	ino   uint64
	ctime syscall.Timespec
}

// NewTokens returns a token table with nothing to read yet.
func NewTokens() *Tokens { return &Tokens{counts: map[[2]string]uint64{}} }

// Configure points the table at filter.state_dir ("" turns tokens off) and
// sets web.tokens_over_http; the composition root calls it at start and on
// every reload.
func (t *Tokens) Configure(dir string, overHTTP bool) {
	t.overHTTP.Store(overHTTP)
	t.mu.Lock()
	defer t.mu.Unlock()
	if dir != t.dir {
		t.dir, t.stamp, t.byHash, t.err = dir, fileStamp{}, nil, nil
	}
}

// refresh reads the file again if it changed. Under mu.
func (t *Tokens) refresh() {
	if t.dir == "" {
		t.byHash = nil
		return
	}
	var st fileStamp
	if fi, err := os.Stat(filepath.Join(t.dir, TokensFile)); err == nil {
		st = fileStamp{ok: true, size: fi.Size(), mtime: fi.ModTime()}
		if s, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.ino, st.ctime = s.Ino, s.Ctim
		}
	}
	if st == t.stamp && t.byHash != nil {
		return
	}
	entries, err := ReadTokens(t.dir)
	if err != nil {
		// Fail closed (docs/dashboard.md, "API tokens"): the last good
		// table would keep a token live that the damaged file revokes.
		// Read again once the file changes.
		if t.err == nil && t.log != nil {
			t.log.Error("API tokens file unreadable: every token is refused until it is fixed", zap.Error(err))
		}
		t.stamp, t.err, t.byHash = st, err, map[string]TokenEntry{}
		return
	}
	if t.err != nil && t.log != nil {
		t.log.Info("API tokens file readable again")
	}
	t.stamp, t.err = st, nil
	t.byHash = make(map[string]TokenEntry, len(entries))
	for _, e := range entries {
		t.byHash[e.SHA256] = e
	}
}

// check judges a presented token: its entry (for the name) and the outcome
// before scope. The token is hashed and looked up by hash; a timing
// difference in the lookup says something about the hash, which is no help
// towards a token.
func (t *Tokens) check(token string, now time.Time) (TokenEntry, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refresh()
	e, ok := t.byHash[hashToken(token)]
	switch {
	case t.err != nil:
		return TokenEntry{Name: unknownTokenName}, TokenUnreadable
	case !ok:
		return TokenEntry{Name: unknownTokenName}, TokenUnknown
	case !e.Revoked.IsZero():
		return e, TokenRevoked
	case !e.Expires.IsZero() && !now.Before(e.Expires):
		return e, TokenExpired
	}
	return e, TokenOK
}

// count adds one request of token name with outcome result.
func (t *Tokens) count(name, result string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := [2]string{name, result}
	if _, ok := t.counts[k]; !ok && len(t.counts) >= maxCounted {
		k[0] = "other"
	}
	t.counts[k]++
}

// TokenCount is one series of nxdns_web_api_token_requests_total.
type TokenCount struct {
	Name, Result string
	N            uint64
}

// Counts are the requests per token and outcome, sorted.
func (t *Tokens) Counts() []TokenCount {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]TokenCount, 0, len(t.counts))
	for k, n := range t.counts {
		out = append(out, TokenCount{Name: k[0], Result: k[1], N: n})
	}
	slices.SortFunc(out, func(a, b TokenCount) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Result, b.Result)
	})
	return out
}

// Dir is the state directory the tokens are kept in; "" when off.
func (t *Tokens) Dir() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dir
}

// List is the tokens in the file, for the dashboard's page; the error says
// why the file could not be read.
func (t *Tokens) List() ([]TokenEntry, error) {
	dir := t.Dir()
	if dir == "" {
		return nil, nil
	}
	return ReadTokens(dir)
}

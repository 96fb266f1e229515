package filter

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"strings"

	"golang.org/x/net/idna"
)

// Kind is how a rule's name matches a query name (docs/design.md#filter-formats).
type Kind uint8

const (
	// Exact matches the name itself: hosts-format and plain-domain entries,
	// as Pi-hole and Blocky read them (such lists enumerate their names).
	Exact Kind = iota
	// Subtree matches the name and every name below it: ||name^.
	Subtree
	// Wildcard matches the names below it, not the name: *.name.
	Wildcard
	// Regex matches when its pattern matches the name: /pattern/.
	Regex
)

// Rule is one parsed rule. Names are lower-case ASCII (IDNs in their
// A-label form) without the trailing dot.
type Rule struct {
	Name      string
	Kind      Kind
	Exception bool           // @@: an exception in a block list
	Important bool           // $important: beats @@ exceptions
	Re        *regexp.Regexp // for Regex
	Text      string         // for Regex: the rule as written
}

// Reason says why a line was ignored: it is a rule of a format nxdns
// recognises, but one the DNS cannot apply or that breaks a bound.
type Reason string

// The reasons a list report counts (the check endpoint and the log show them).
const (
	ReasonModifier    Reason = "unsupported modifier" // $third-party, $domain=…: not visible to the DNS
	ReasonInvalidName Reason = "invalid name"         // not a domain name (an IP, a single label in a hosts file, bad bytes)
	ReasonLongRegex   Reason = "over-long regex"      // longer than MaxRegexLen
	ReasonManyRegexes Reason = "too many regexes"     // past MaxRegexes in one list
	ReasonCosmetic    Reason = "cosmetic rule"        // ##, #@#, #?#: for a browser's page, not for DNS
	ReasonURL         Reason = "url rule"             // ||host^/path, |https://…: a URL, not a name
	ReasonNamesCap    Reason = "over the names cap"   // past filter.max_names_per_list, or filter.max_names in all
)

// Bounds on what one list may cost (docs/design.md#filter-formats: "count and length bounded").
const (
	// MaxRegexLen is the longest regex rule taken, in bytes.
	MaxRegexLen = 256
	// MaxRegexes is how many regex rules one list may carry. Every query
	// that no hashed rule decides is checked against every regex, so this
	// bounds the per-query cost (docs/filter.md measures it).
	MaxRegexes = 16
	// MaxLineLen is the longest line read; a longer one is rejected and
	// skipped without being held in memory.
	MaxLineLen = 4096
	// MaxListBytes caps one list's size: a list of 1 million hosts-format
	// names is about 30 MB.
	MaxListBytes = 64 << 20
)

// Report is what parsing one list found.
type Report struct {
	Taken    int            // lines that gave rules
	Rules    int            // rules (a hosts line may name several)
	Ignored  map[Reason]int // recognised lines the DNS cannot apply, by reason
	Rejected int            // lines of no recognised format
	Bytes    int64          // bytes read
	// NamesOverCap is how many names (not lines) the names caps left out
	// of the set when the list was loaded; Ignored counts their lines.
	NamesOverCap int
}

// IgnoredTotal is the sum of Ignored.
func (r Report) IgnoredTotal() int {
	n := 0
	for _, v := range r.Ignored {
		n += v
	}
	return n
}

func (r *Report) ignore(why Reason) {
	if r.Ignored == nil {
		r.Ignored = map[Reason]int{}
	}
	r.Ignored[why]++
}

// Errors that reject a list whole: nothing of it is used, and the last good
// copy stays.
var (
	ErrBinary = errors.New("binary content (NUL bytes): not a list")
	ErrHTML   = errors.New("an HTML page, not a list (a captive portal or an error page?)")
	ErrTooBig = fmt.Errorf("over %d MiB: not loaded (the cap keeps a runaway download from filling memory and disk)", MaxListBytes>>20)
)

var bom = []byte("\xef\xbb\xbf")

// listCap is MaxListBytes; a variable so a test can check the cap without
// producing 64 MiB.
var listCap int64 = MaxListBytes

// Parse reads a list and hands each rule to emit, in order. A line that is
// a comment, blank or cosmetic gives nothing; a line of no recognised
// format is counted as rejected and skipped. Parse returns an error only
// when the list must be rejected whole (ErrBinary, ErrHTML, ErrTooBig, a
// read error); the rules already emitted must then be discarded.
func Parse(r io.Reader, emit func(Rule)) (Report, error) { return parse(r, emit, nil) }

// parse is Parse; next, when not nil, is called before each line is
// parsed, so a caller can tell one line's rules from the next's (a hosts
// line may name several).
func parse(r io.Reader, emit func(Rule), next func()) (Report, error) {
	var rep Report
	br := bufio.NewReaderSize(io.LimitReader(r, listCap+1), 64<<10)
	regexes := 0
	first := true
	for {
		line, long, err := readLine(br, &rep.Bytes)
		if rep.Bytes > listCap {
			return rep, ErrTooBig
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return rep, ErrBinary
		}
		if first {
			line = bytes.TrimPrefix(line, bom)
		}
		if long {
			rep.Rejected++
		} else if len(bytes.TrimSpace(line)) > 0 {
			if first && looksHTML(line) {
				return rep, ErrHTML
			}
			first = false
			if next != nil {
				next()
			}
			parseLine(string(line), &rep, &regexes, emit)
		}
		if err == io.EOF {
			return rep, nil
		}
		if err != nil {
			return rep, err
		}
	}
}

// readLine returns the next line without its line end; long reports a line
// over MaxLineLen, whose bytes are skipped and not returned.
func readLine(br *bufio.Reader, n *int64) (line []byte, long bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		*n += int64(len(chunk))
		if !long {
			if len(buf)+len(chunk) > MaxLineLen+2 {
				long, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if *n > listCap {
			return nil, long, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if long {
			return nil, true, err
		}
		return bytes.TrimRight(buf, "\r\n"), false, err
	}
}

// looksHTML reports whether a list's first line is markup.
func looksHTML(line []byte) bool {
	l := bytes.ToLower(bytes.TrimSpace(line))
	for _, p := range []string{"<!doctype", "<html", "<head", "<body", "<?xml"} {
		if bytes.HasPrefix(l, []byte(p)) {
			return true
		}
	}
	return false
}

// ParseLine parses one rule line (filter.block and filter.allow entries),
// reporting what it found.
func ParseLine(line string, emit func(Rule)) Report {
	var rep Report
	regexes := 0
	parseLine(line, &rep, &regexes, emit)
	return rep
}

func parseLine(line string, rep *Report, regexes *int, emit func(Rule)) {
	line = strings.TrimSpace(line)
	switch {
	case line == "", line[0] == '#', line[0] == '!', line[0] == '[' && strings.HasSuffix(line, "]"):
		return // comment, blank, "[Adblock Plus 2.0]"
	case strings.Contains(line, "##") || strings.Contains(line, "#@#") || strings.Contains(line, "#?#") ||
		strings.Contains(line, "#$#") || strings.Contains(line, "#%#"):
		rep.ignore(ReasonCosmetic)
		return
	}
	if len(line) >= 2 && line[0] == '/' && strings.HasSuffix(line, "/") {
		parseRegex(line, false, rep, regexes, emit)
		return
	}
	if rest, ok := strings.CutPrefix(line, "@@"); ok {
		if len(rest) >= 2 && rest[0] == '/' && strings.HasSuffix(rest, "/") {
			parseRegex(rest, true, rep, regexes, emit)
			return
		}
		parseAdblock(rest, true, rep, emit)
		return
	}
	if strings.HasPrefix(line, "||") || strings.HasPrefix(line, "|") {
		parseAdblock(line, false, rep, emit)
		return
	}
	// Strip an end-of-line comment: "0.0.0.0 ads.example # tracker".
	if i := strings.Index(line, " #"); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	if i := strings.Index(line, "\t#"); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	fields := strings.Fields(line)
	if len(fields) >= 2 {
		if _, err := netip.ParseAddr(stripZone(fields[0])); err != nil {
			rep.Rejected++
			return
		}
		took := 0
		for _, f := range fields[1:] {
			name, ok := normalise(f, Exact)
			if !ok {
				rep.ignore(ReasonInvalidName)
				continue
			}
			emit(Rule{Name: name, Kind: Exact})
			rep.Rules++
			took++
		}
		if took > 0 {
			rep.Taken++
		}
		return
	}
	// One field: a plain domain or *.domain.
	kind, f := Exact, fields[0]
	if rest, ok := strings.CutPrefix(f, "*."); ok {
		kind, f = Wildcard, rest
	}
	takeName(f, Rule{Kind: kind}, rep, emit)
}

// takeName emits r for the one name s of a line, counting the line taken;
// a name that does not normalise is an invalid name when it looks like one
// and a rejected line otherwise.
func takeName(s string, r Rule, rep *Report, emit func(Rule)) {
	name, ok := normalise(s, r.Kind)
	if !ok {
		if looksLikeName(s) {
			rep.ignore(ReasonInvalidName)
		} else {
			rep.Rejected++
		}
		return
	}
	r.Name = name
	emit(r)
	rep.Rules++
	rep.Taken++
}

// stripZone drops an IPv6 zone ("fe80::1%lo0", seen in hosts files).
func stripZone(s string) string {
	if i := strings.IndexByte(s, '%'); i >= 0 {
		return s[:i]
	}
	return s
}

// parseAdblock parses ||name^ (and |name^, ||name) with optional
// $modifiers; exception says it came after @@. A plain name after @@ is an
// exact exception.
func parseAdblock(s string, exception bool, rep *Report, emit func(Rule)) {
	body, mods, _ := strings.Cut(s, "$")
	important := false
	if mods != "" {
		for m := range strings.SplitSeq(mods, ",") {
			if strings.TrimSpace(strings.ToLower(m)) == "important" {
				important = true
				continue
			}
			rep.ignore(ReasonModifier)
			return
		}
	}
	kind := Exact
	switch {
	case strings.HasPrefix(body, "||"):
		kind, body = Subtree, body[2:]
	case strings.HasPrefix(body, "|"):
		body = body[1:]
		if strings.Contains(body, "://") {
			rep.ignore(ReasonURL)
			return
		}
	}
	body = strings.TrimSuffix(body, "|")
	if b, ok := strings.CutSuffix(body, "^"); ok {
		body = b
	} else if strings.ContainsAny(body, "^/") {
		rep.ignore(ReasonURL) // ||host^/path, ||host/path
		return
	}
	if kind == Exact {
		if rest, ok := strings.CutPrefix(body, "*."); ok {
			kind, body = Wildcard, rest
		}
	}
	takeName(body, Rule{Kind: kind, Exception: exception, Important: important}, rep, emit)
}

func parseRegex(s string, exception bool, rep *Report, regexes *int, emit func(Rule)) {
	if len(s) > MaxRegexLen+2 {
		rep.ignore(ReasonLongRegex)
		return
	}
	if *regexes >= MaxRegexes {
		rep.ignore(ReasonManyRegexes)
		return
	}
	re, err := regexp.Compile(s[1 : len(s)-1])
	if err != nil {
		rep.Rejected++
		return
	}
	*regexes++
	emit(Rule{Kind: Regex, Re: re, Text: s, Exception: exception})
	rep.Rules++
	rep.Taken++
}

// looksLikeName tells an invalid name ("ads..example", "1.2.3.4") from a
// line that is no rule at all ("<div>", "foo bar baz"): the first is
// ignored with a reason, the second rejected.
func looksLikeName(s string) bool {
	return s != "" && strings.Contains(s, ".") && !strings.ContainsAny(s, " <>\"'=(){}")
}

// normalise returns s as rules compare names: lower-case, no trailing
// dot, an IDN in its ASCII form; ok is false for anything that is not a
// domain name, for IP literals, and for single-label names of an Exact rule
// (localhost, broadcasthost in hosts files: the local stage answers those).
func normalise(s string, kind Kind) (string, bool) {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return "", false
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		a, err := idna.Lookup.ToASCII(s)
		if err != nil {
			return "", false
		}
		s = a
	}
	s = strings.ToLower(s)
	if !validName(s) {
		return "", false
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return "", false
	}
	if kind == Exact && !strings.Contains(s, ".") {
		return "", false
	}
	return s, true
}

// validName: labels of letters, digits, '-' and '_' (tracker lists carry
// service names), 1 to 63 bytes, 253 in all.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

package history

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// Row is one stored query: every field of the query event (docs/design.md#query-event) in the
// form the history keeps, with the answer reduced to its summary.
type Row struct {
	Time       time.Time
	Client     netip.Addr
	ClientName string
	ClientMAC  string // the device's MAC, "" when none was known (docs/devices.md)
	Proto      query.Proto
	Name       string // as the client asked it
	Qtype      uint16
	Qclass     uint16
	Source     string
	Upstream   string
	Tried      []string
	Cache      string
	Filter     query.Decision
	Rcode      int // query.RcodeNone when nothing was sent
	EDE        *query.EDE
	Duration   time.Duration
	Answer     string // query.Summary of the reply
}

// fromEvent copies what the history keeps of e. It runs on the query's
// goroutine (Sink.Record): a copy and a short summary, no I/O.
func fromEvent(e *query.Event) Row {
	r := Row{
		Time: e.Time, Client: e.Client, ClientName: e.ClientName, ClientMAC: e.ClientMAC, Proto: e.Proto,
		Name: e.Name, Qtype: e.Qtype, Qclass: e.Qclass,
		Source: e.Source, Upstream: e.Upstream, Tried: e.Tried, Cache: e.Cache,
		Filter: e.Filter, Rcode: e.Rcode, Duration: e.Duration,
		Answer: e.Answer,
	}
	if r.Answer == "" {
		r.Answer = query.Summary(e.Reply) // an event recorded by other means than the server's
	}
	if e.EDE != nil {
		ede := *e.EDE
		r.EDE = &ede
	}
	return r
}

// RcodeName is the rcode as the API and the dashboard show it: "NOERROR",
// "NXDOMAIN", or "none" when nothing was sent.
func RcodeName(rcode int) string {
	if rcode == query.RcodeNone {
		return "none"
	}
	if s, ok := dns.RcodeToString[rcode]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(rcode)
}

// ParseRcode is RcodeName's inverse, case-insensitive.
func ParseRcode(s string) (int, bool) {
	if strings.EqualFold(s, "none") {
		return query.RcodeNone, true
	}
	if v, ok := dns.StringToRcode[strings.ToUpper(s)]; ok {
		return v, true
	}
	return 0, false
}

// The stored form of a Row. Keys are the arrival time (unix nanoseconds,
// big-endian, so byte order is time order) and a sequence number that keeps
// two queries of the same nanosecond apart. Values start with a format
// version and the name, so a search by name looks at the name before
// decoding anything else.
const (
	keyLen       = 12
	rowVersion   = 1
	maxFieldLen  = 4096 // no field of a valid row is longer (a DNS name is 255 bytes)
	maxTriedRead = 64   // upstreams tried, at most one per configured upstream
)

var errCorruptRow = errors.New("history: corrupt row")

func rowKey(t time.Time, seq uint32) []byte {
	k := make([]byte, keyLen)
	putRowKey(k, t, seq)
	return k
}

// putRowKey writes rowKey(t, seq) into k[:keyLen].
func putRowKey(k []byte, t time.Time, seq uint32) {
	// Before 1970 (a Pi booted without its clock set reads 1970 at worst)
	// clamps to 0 so that byte order stays time order.
	binary.BigEndian.PutUint64(k, uint64(max(t.UnixNano(), 0)))
	binary.BigEndian.PutUint32(k[8:], seq)
}

func keyTime(k []byte) time.Time {
	if len(k) < 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k)))
}

// timeKey is the smallest key at or after t.
func timeKey(t time.Time) []byte { return rowKey(t, 0) }

// rowSizeHint is about the encoded size of r: room for its usual fields.
func rowSizeHint(r *Row) int {
	return 96 + len(r.Name) + len(r.ClientName) + len(r.ClientMAC) + len(r.Answer)
}

// appendRow appends r's encoding, a value of the rows bucket (decodeRow
// reads it), to b.
func appendRow(b []byte, r *Row) []byte {
	b = append(b, rowVersion)
	b = appendStr(b, r.Name)
	var addr [18]byte // an IPv6 address and a zone would not fit: clients have none
	ab, _ := r.Client.AppendBinary(addr[:0])
	b = appendBytes(b, ab)
	b = appendStr(b, r.ClientName)
	b = append(b, byte(r.Proto))
	b = binary.AppendUvarint(b, uint64(r.Qtype))
	b = binary.AppendUvarint(b, uint64(r.Qclass))
	b = appendStr(b, r.Source)
	b = appendStr(b, r.Upstream)
	b = binary.AppendUvarint(b, uint64(len(r.Tried)))
	for _, t := range r.Tried {
		b = appendStr(b, t)
	}
	b = appendStr(b, r.Cache)
	if r.Filter.Blocked {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendStr(b, r.Filter.List)
	b = appendStr(b, r.Filter.Rule)
	b = appendStr(b, r.Filter.Group)
	b = binary.AppendVarint(b, int64(r.Rcode))
	if r.EDE != nil {
		b = binary.AppendUvarint(b, uint64(r.EDE.Code)+1)
		b = appendStr(b, r.EDE.Text)
	} else {
		b = binary.AppendUvarint(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(max(r.Duration, 0)/time.Microsecond))
	b = appendStr(b, r.Answer)
	// Fields added after format version 1 follow, each optional: a row
	// written before them ends here and reads them as empty, and an older
	// nxdns reading a newer row stops before them.
	if r.ClientMAC != "" {
		b = appendStr(b, r.ClientMAC)
	}
	return b
}

func appendBytes(b, s []byte) []byte {
	if len(s) > maxFieldLen {
		s = s[:maxFieldLen]
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStr(b []byte, s string) []byte {
	if len(s) > maxFieldLen {
		s = s[:maxFieldLen]
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// rowName returns the stored name without decoding the rest.
func rowName(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] != rowVersion {
		return nil, false
	}
	d := decoder{b: v[1:]}
	s := d.bytes()
	return s, d.err == nil
}

func decodeRow(k, v []byte) (Row, error) { return decodeRowInterned(k, v, nil) }

// decodeRowInterned is decodeRow with its strings drawn from in: the rows
// of one flush repeat a few names, clients and upstreams thousands of
// times, and copying each was most of a busy flush's garbage.
func decodeRowInterned(k, v []byte, in *interner) (Row, error) {
	if len(k) != keyLen || len(v) == 0 || v[0] != rowVersion {
		return Row{}, errCorruptRow
	}
	d := decoder{b: v[1:], in: in}
	r := Row{Time: keyTime(k)}
	r.Name = d.str()
	if ab := d.bytes(); d.err == nil {
		if err := r.Client.UnmarshalBinary(ab); err != nil {
			return Row{}, errCorruptRow
		}
	}
	r.ClientName = d.str()
	r.Proto = query.Proto(d.byte())
	r.Qtype = uint16(d.uvarint())
	r.Qclass = uint16(d.uvarint())
	r.Source = d.str()
	r.Upstream = d.str()
	if n := d.uvarint(); n > 0 {
		if n > maxTriedRead {
			return Row{}, errCorruptRow
		}
		r.Tried = make([]string, n)
		for i := range r.Tried {
			r.Tried[i] = d.str()
		}
	}
	r.Cache = d.str()
	r.Filter.Blocked = d.byte() == 1
	r.Filter.List = d.str()
	r.Filter.Rule = d.str()
	r.Filter.Group = d.str()
	r.Rcode = int(d.varint())
	if c := d.uvarint(); c > 0 {
		r.EDE = &query.EDE{Code: uint16(c - 1), Text: string(d.bytes())}
	}
	r.Duration = time.Duration(d.uvarint()) * time.Microsecond
	r.Answer = d.str()
	if d.err == nil && len(d.b) > 0 {
		r.ClientMAC = d.str() // optional trailing field (appendRow)
	}
	if d.err != nil {
		return Row{}, d.err
	}
	return r, nil
}

// decoder reads the fields of a stored row; the first error sticks and
// every later read returns zero, so decodeRow checks once at the end.
type decoder struct {
	b   []byte
	err error
	in  *interner // nil: every string is a copy
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorruptRow
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint undoes binary.AppendVarint's zig-zag over an unsigned varint.
func (d *decoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errCorruptRow
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > maxFieldLen || n > uint64(len(d.b)) {
		d.err = errCorruptRow
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// str is the next field as a string, interned when the decoder has an
// interner.
func (d *decoder) str() string { return d.in.string(d.bytes()) }

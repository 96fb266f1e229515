package history

import (
	"encoding/binary"
	"math"
	"testing"
)

// The decoder reads back every varint binary.AppendVarint writes, negative
// ones included, and a truncated one sticks as an error.
func TestDecoder_varintRoundTrip(t *testing.T) {
	values := []int64{0, 1, -1, 63, -64, 300, -300, math.MaxInt64, math.MinInt64}
	var b []byte
	for _, v := range values {
		b = binary.AppendVarint(b, v)
	}
	d := &decoder{b: b}
	for _, want := range values {
		if got := d.varint(); got != want {
			t.Errorf("varint = %d, want %d", got, want)
		}
	}
	if d.err != nil {
		t.Fatalf("err %v after whole varints", d.err)
	}
	d = &decoder{b: []byte{0x80}} // a continuation byte and nothing after it
	if d.varint(); d.err != errCorruptRow {
		t.Errorf("truncated varint: err %v, want errCorruptRow", d.err)
	}
}

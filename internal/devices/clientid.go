package devices

// MaxClientID is the longest ClientID accepted: one DNS label (RFC 1035
// §2.3.4), so that the same name fits a DoT SNI label.
const MaxClientID = 63

// ValidClientID reports whether id may name a device (docs/devices.md
// "ClientID"): one DNS label — 1 to 63 letters, digits and hyphens, not
// starting or ending with a hyphen — as AdGuard Home's ClientIDs are.
// Anything else (markup, a path, 10 kB of text) is refused whole, never
// shortened.
func ValidClientID(id string) bool {
	if id == "" || len(id) > MaxClientID || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

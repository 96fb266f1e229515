package filter

import (
	"slices"
	"strings"
)

// Problem says why the rules of rep's line (or lines) were not all taken,
// in the words of the list report; "" when every line gave rules or was a
// comment. `nxdns check` and the inline rules' warning use it, so a
// filter.block entry that does nothing says why.
func (r Report) Problem() string {
	var why []string
	if r.Rejected > 0 {
		why = append(why, "no rule format nxdns reads (want a name, a hosts line such as \"0.0.0.0 ads.example\", \"||ads.example^\", or a regex between slashes such as \"/^ads[0-9]+\\.example$/\")")
	}
	reasons := make([]string, 0, len(r.Ignored))
	for reason := range r.Ignored {
		reasons = append(reasons, string(reason))
	}
	slices.Sort(reasons)
	for _, reason := range reasons {
		why = append(why, reason+hints[Reason(reason)])
	}
	return strings.Join(why, "; ")
}

// hints follow a Reason in Problem: what to write instead.
var hints = map[Reason]string{
	ReasonInvalidName: ": not a domain name (a regex goes between slashes: /^ads[0-9]+\\.example$/)",
	ReasonURL:         ": DNS sees names, not URLs or paths (write the name alone, e.g. ||ads.example^)",
	ReasonModifier:    ": the DNS cannot see what a $ modifier selects (write the rule without it)",
	ReasonCosmetic:    ": it hides page elements in a browser, nothing the DNS can do",
	ReasonLongRegex:   " (a regex is at most 256 bytes)",
	ReasonManyRegexes: " (at most 16 regexes per list)",
}

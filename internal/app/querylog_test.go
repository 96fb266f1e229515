package app

import (
	"strings"
	"testing"
)

// TestQueryLog_summarisesTheAnswer: the real chain's query line carries the
// answer's summary beside the attributed upstream (issue 16, finding 19).
// The list of upstreams tried is tested where a failover can be made
// deterministic: TestPool_resolveTriedListsEveryUpstream and
// TestQueryLog_triedAndAnswer.
func TestQueryLog_summarisesTheAnswer(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	on := true
	cfg.Log.Queries = &on
	r.start(t, cfg)
	ask(t, addr, "answer.example.")
	// The line is written after the answer was sent.
	waitUntil(t, "the query's line", func() bool { return r.observed.FilterMessage("query").Len() >= 1 })
	lines := r.observed.FilterMessage("query").All()
	if len(lines) != 1 {
		t.Fatalf("%d query lines, want 1", len(lines))
	}
	m := lines[0].ContextMap()
	if m["upstream"] != r.dotURL {
		t.Errorf("upstream = %v, want %s", m["upstream"], r.dotURL)
	}
	if ans, _ := m["answer"].(string); !strings.HasPrefix(ans, "A ") {
		t.Errorf("answer = %q, want an A record summary", m["answer"])
	}
	if _, has := m["tried"]; has {
		t.Errorf("tried = %v on a first-try answer: upstream says it all", m["tried"])
	}
}

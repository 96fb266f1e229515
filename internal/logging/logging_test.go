package logging

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

var timestamp = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}`)

func TestJournalLinesCarryPriorityAndNoTimestamp(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "8:12345")
	var buf bytes.Buffer
	opts := FromEnv(zap.NewAtomicLevelAt(zapcore.DebugLevel))
	opts.Out = &buf
	log := New(opts).Named("pool")
	log.Debug("d")
	log.Info("upstream recovered", zap.String("url", "tls://192.0.2.1:853"))
	log.Warn("upstream entering backoff")
	log.Error("e")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"<7>", "<6>", "<4>", "<3>"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]+"DEBUG") && !strings.HasPrefix(l, want[i]+"INFO") &&
			!strings.HasPrefix(l, want[i]+"WARN") && !strings.HasPrefix(l, want[i]+"ERROR") {
			t.Errorf("line %d = %q, want prefix %s followed by the level", i, l, want[i])
		}
		if timestamp.MatchString(l) {
			t.Errorf("line %d carries a timestamp under journald: %q", i, l)
		}
	}
	if !strings.Contains(lines[1], "pool") || !strings.Contains(lines[1], `"url": "tls://192.0.2.1:853"`) {
		t.Errorf("info line lost its logger name or fields: %q", lines[1])
	}
}

func TestTerminalLinesHaveTimestampNoPriority(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "")
	var buf bytes.Buffer
	opts := FromEnv(zap.NewAtomicLevelAt(zapcore.InfoLevel))
	opts.Out = &buf
	New(opts).Info("hello")
	l := buf.String()
	if strings.HasPrefix(l, "<") || !timestamp.MatchString(l) {
		t.Fatalf("terminal line = %q, want a timestamp and no priority prefix", l)
	}
}

func TestLevelFiltersAndChangesInPlace(t *testing.T) {
	var buf bytes.Buffer
	lvl := zap.NewAtomicLevelAt(zapcore.WarnLevel)
	log := New(Options{Level: lvl, Out: &buf})
	log.Info("dropped")
	lvl.SetLevel(zapcore.InfoLevel) // what a reload does
	log.Info("kept")
	if s := buf.String(); strings.Contains(s, "dropped") || !strings.Contains(s, "kept") {
		t.Fatalf("output = %q", s)
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "warn": zapcore.WarnLevel, "error": zapcore.ErrorLevel} {
		if got, err := ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseLevel("verbose"); err == nil {
		t.Error("ParseLevel(verbose) accepted")
	}
}

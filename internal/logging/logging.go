// Package logging builds nxdns's zap logger. Under systemd (JOURNAL_STREAM
// set) journald stamps every line itself and reads the syslog priority from
// a "<N>" prefix (sd-daemon(3)), so the logger writes no timestamp of its own
// and prefixes each line with the level's priority; elsewhere it writes
// human-readable lines with a timestamp to stderr.
package logging

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// Options chooses where and how lines are written.
type Options struct {
	Level   zap.AtomicLevel // shared, so a reload can change it in place
	Journal bool            // JOURNAL_STREAM is set: priority prefixes, no timestamps
	Out     io.Writer       // default os.Stderr
	// Async puts a bounded queue between the loggers and Out, so a sink that
	// stops draining costs dropped lines (Dropped), never a blocked caller
	// (docs/design.md#log-never-blocks). nxdns run sets it; tests reading Out right after logging
	// leave it off.
	Async bool
}

// FromEnv fills Journal from the environment the way systemd documents it:
// JOURNAL_STREAM is set for services whose stderr is connected to journald.
func FromEnv(level zap.AtomicLevel) Options {
	return Options{Level: level, Journal: os.Getenv("JOURNAL_STREAM") != ""}
}

// ParseLevel maps log.level to zap's levels; the config package has already
// validated the word, so an unknown one is a programming error reported here.
func ParseLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return zapcore.InfoLevel, fmt.Errorf("unknown log level %q", s)
}

// New builds the logger.
func New(opts Options) *zap.Logger {
	out := opts.Out
	if out == nil {
		out = os.Stderr
	}
	ec := zapcore.EncoderConfig{
		TimeKey:       "ts",
		LevelKey:      "level",
		NameKey:       "logger",
		MessageKey:    "msg",
		StacktraceKey: "stacktrace",
		LineEnding:    zapcore.DefaultLineEnding,
		EncodeLevel:   zapcore.CapitalLevelEncoder,
		EncodeTime:    zapcore.ISO8601TimeEncoder,
		// "1m33.25s", not 93250: a bare number's unit is a guess for
		// whoever reads the journal (issue 16, finding 19). Keys that must
		// stay numbers carry the unit in their name (duration_ms).
		EncodeDuration:   zapcore.StringDurationEncoder,
		EncodeName:       zapcore.FullNameEncoder,
		ConsoleSeparator: " ",
	}
	var enc zapcore.Encoder
	if opts.Journal {
		ec.TimeKey = "" // journald stamps the line
		enc = journalEncoder{zapcore.NewConsoleEncoder(ec)}
	} else {
		enc = zapcore.NewConsoleEncoder(ec)
	}
	var sink zapcore.WriteSyncer = zapcore.Lock(zapcore.AddSync(out))
	if opts.Async {
		sink = newAsyncWriter(out, &dropped) // one writer goroutine: needs no lock
	}
	core := zapcore.NewCore(enc, sink, opts.Level)
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(os.Stderr)))
}

// journalEncoder prefixes each line with its syslog priority, which journald
// strips and stores as PRIORITY (systemd.exec(5), SyslogLevelPrefix=).
type journalEncoder struct{ zapcore.Encoder }

var pool = buffer.NewPool()

func (e journalEncoder) Clone() zapcore.Encoder { return journalEncoder{e.Encoder.Clone()} }

func (e journalEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	line, err := e.Encoder.EncodeEntry(ent, fields)
	if err != nil {
		return nil, err
	}
	out := pool.Get()
	out.AppendString(priority(ent.Level))
	out.Write(line.Bytes())
	line.Free()
	return out, nil
}

// priority is the sd-daemon(3) prefix for a level: err, warning, info, debug.
func priority(l zapcore.Level) string {
	switch {
	case l >= zapcore.DPanicLevel:
		return "<2>" // crit
	case l >= zapcore.ErrorLevel:
		return "<3>"
	case l >= zapcore.WarnLevel:
		return "<4>"
	case l >= zapcore.InfoLevel:
		return "<6>"
	default:
		return "<7>"
	}
}

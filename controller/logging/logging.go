// Package logging builds gearshift's zap logger: JSON lines to a log file
// that SIGUSR1 can reopen after logrotate, and optionally a console copy.
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gearshift/gearshift/internal/ownfile"
)

// File is a log file that can be reopened at the same path (after
// logrotate renamed it). It is safe for concurrent use.
type File struct {
	mu        sync.Mutex
	path      string
	f         *os.File
	writeErr  string // the last write's error, "" once a write works again
	reopenErr string // the last reopen's error, "" once a reopen works

	writeErrors atomic.Uint64
}

// OpenFile opens path for appending, creating it (0640, its directory's
// group: adm reads /var/log/gearshift) and its directory (0755) when
// missing. A symbolic link at path is refused, at start and at every
// reopen (the old file stays in use, and Health says why).
func OpenFile(path string) (*File, error) {
	lf := &File{path: path}
	if err := lf.Reopen(); err != nil {
		return nil, err
	}
	return lf, nil
}

// Path returns the file's path.
func (lf *File) Path() string { return lf.path }

// Reopen closes the file and opens path again. On error the old file stays
// in use.
func (lf *File) Reopen() error {
	if err := os.MkdirAll(filepath.Dir(lf.path), 0o755); err != nil {
		lf.mu.Lock()
		lf.reopenErr = "reopen " + lf.path + ": " + unwrap(err)
		lf.mu.Unlock()
		return fmt.Errorf("create log directory: %w", err)
	}
	f, err := ownfile.Open(lf.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	if err != nil {
		lf.mu.Lock()
		lf.reopenErr = "reopen " + lf.path + ": " + unwrap(err)
		lf.mu.Unlock()
		return fmt.Errorf("open log file: %w", err)
	}
	lf.mu.Lock()
	old := lf.f
	lf.f = f
	lf.reopenErr = ""
	lf.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// Write appends p to the file.
func (lf *File) Write(p []byte) (int, error) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil {
		return 0, os.ErrClosed
	}
	n, err := lf.f.Write(p)
	if err != nil {
		lf.writeErrors.Add(1)
		lf.writeErr = "write " + lf.path + ": " + unwrap(err)
	} else {
		lf.writeErr = ""
	}
	return n, err
}

// Health returns what is wrong with the log file ("" while it works: the
// last write and reopen went through) and how many writes failed since it
// was opened. The daemon goes on without its log; status, check and the
// metrics say so.
func (lf *File) Health() (problem string, writeErrors uint64) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	problem = lf.reopenErr
	if problem == "" {
		problem = lf.writeErr
	}
	return problem, lf.writeErrors.Load()
}

// unwrap drops the path an *os.PathError repeats.
func unwrap(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Sync flushes the file to disk.
func (lf *File) Sync() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil {
		return nil
	}
	return lf.f.Sync()
}

// Close closes the file.
func (lf *File) Close() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil {
		return nil
	}
	err := lf.f.Close()
	lf.f = nil
	return err
}

// ParseLevel parses a log.level value: debug, info, warn or error.
func ParseLevel(s string) (zapcore.Level, error) {
	if s == "" {
		return zapcore.InfoLevel, nil
	}
	var l zapcore.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("unknown log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// EncoderConfig is the shape of gearshift's JSON log lines: ts (RFC 3339
// with nanoseconds), level (lower case), msg, then the event's fields.
func EncoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		TimeKey:        keyTime,
		LevelKey:       keyLevel,
		MessageKey:     keyMsg,
		NameKey:        keyName,
		StacktraceKey:  "",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
	}
}

// New returns a logger writing JSON lines to file and, when console is not
// nil, human-readable lines to console (a terminal or the journal), at
// level. Either may be nil.
func New(file zapcore.WriteSyncer, console io.Writer, level zap.AtomicLevel) *zap.Logger {
	var cores []zapcore.Core
	if file != nil {
		cores = append(cores, zapcore.NewCore(zapcore.NewJSONEncoder(EncoderConfig()), file, level))
	}
	if console != nil {
		ec := EncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		ec.ConsoleSeparator = "  "
		cores = append(cores, zapcore.NewCore(zapcore.NewConsoleEncoder(ec), zapcore.Lock(zapcore.AddSync(console)), level))
	}
	return zap.New(zapcore.NewTee(cores...))
}

// Worthy reports whether the n-th consecutive failure is logged: the
// first ones, then at every power of two, so a long outage does not flood
// the log.
func Worthy(n int) bool {
	return n <= 3 || n&(n-1) == 0
}

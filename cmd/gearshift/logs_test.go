package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

// logsNow is 16:10 UTC on the day of testdata/logs/gearshift.log.
var logsNow = time.Date(2026, 11, 30, 16, 10, 0, 0, time.UTC)

func testLogOptions() logOptions {
	return logOptions{lines: 20, poll: 5 * time.Millisecond, loc: time.UTC, now: func() time.Time { return logsNow }}
}

func TestLogsGolden(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(o *logOptions)
		golden string
	}{
		{"default", nil, "default"},
		{"last three", func(o *logOptions) { o.lines = 3 }, "n3"},
		{"transitions", func(o *logOptions) { o.transitions = true }, "transitions"},
		{"transitions json", func(o *logOptions) { o.transitions, o.json = true, true }, "transitions-json"},
		{"since ten minutes", func(o *logOptions) { o.since = "10m" }, "since"},
		{"since a time, last one", func(o *logOptions) { o.since, o.lines, o.linesSet = "2026-11-30T15:05:00Z", 1, true }, "since-time-n1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testLogOptions()
			if tc.edit != nil {
				tc.edit(&o)
			}
			var out bytes.Buffer
			a := &app{stdout: &out, stderr: &out}
			code, err := a.logs(context.Background(), filepath.Join("testdata", "logs", "gearshift.log"), o)
			if code != 0 || err != nil {
				t.Fatalf("logs: %d, %v", code, err)
			}
			golden.Check(t, "logs/"+tc.golden+".golden", []byte(out.String()))
		})
	}
}

func TestLogsErrors(t *testing.T) {
	a := &app{stdout: &bytes.Buffer{}}
	o := testLogOptions()
	if code, err := a.logs(context.Background(), filepath.Join(t.TempDir(), "absent.log"), o); code != 1 || err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing log: %d, %v", code, err)
	}
	o.since = "yesterday-ish"
	if code, err := a.logs(context.Background(), "testdata/logs/gearshift.log", o); code != 2 || err == nil {
		t.Errorf("bad --since: %d, %v", code, err)
	}
	o = testLogOptions()
	o.lines = -1
	if code, _ := a.logs(context.Background(), "testdata/logs/gearshift.log", o); code != 2 {
		t.Errorf("-n -1: exit %d, want 2", code)
	}
}

// lineSink collects what `logs -f` prints, line by line, across goroutines.
type lineSink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func newLineSink() *lineSink { return &lineSink{lines: make(chan string, 100)} }

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	for {
		line, err := s.buf.ReadString('\n')
		if err != nil {
			s.buf.WriteString(line)
			break
		}
		s.lines <- strings.TrimSuffix(line, "\n")
	}
	return len(p), nil
}

// expect waits for the next printed lines to be want, in order.
func (s *lineSink) expect(tb testing.TB, want ...string) {
	tb.Helper()
	for _, w := range want {
		select {
		case got := <-s.lines:
			if got != w {
				tb.Fatalf("printed %q, want %q", got, w)
			}
		case <-time.After(5 * time.Second):
			tb.Fatalf("waited in vain for %q", w)
		}
	}
}

func (s *lineSink) expectNothing(tb testing.TB) {
	tb.Helper()
	select {
	case got := <-s.lines:
		tb.Fatalf("unexpected line %q", got)
	case <-time.After(50 * time.Millisecond): // ten polls
	}
}

func appendLog(tb testing.TB, path string, lines ...string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			tb.Fatal(err)
		}
	}
}

func logEntryLine(n int) string {
	return fmt.Sprintf(`{"level":"info","ts":%d,"msg":"state change","from":"light","to":"heavy","reason":"entry %d","switch_ms":0.5}`, 1796050800+n, n)
}

func logHumanLine(n int) string {
	return fmt.Sprintf("2026-11-30 15:00:%02d  light → heavy        entry %d  (switch 0.5 ms)", n, n)
}

// startFollow runs `logs -f --json=false` on path until the test ends.
func startFollow(t *testing.T, path string, edit func(*logOptions)) *lineSink {
	t.Helper()
	sink := newLineSink()
	a := &app{stdout: sink, stderr: sink}
	o := testLogOptions()
	o.follow, o.lines = true, 2
	if edit != nil {
		edit(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.logs(ctx, path, o)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("logs -f: %v", err)
		}
	})
	return sink
}

func TestLogsFollowRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gearshift.log")
	appendLog(t, path, logEntryLine(1), logEntryLine(2), logEntryLine(3))
	sink := startFollow(t, path, nil)
	sink.expect(t, logHumanLine(2), logHumanLine(3)) // -n 2
	appendLog(t, path, logEntryLine(4))
	sink.expect(t, logHumanLine(4))

	// logrotate's default: rename, then the daemon (SIGUSR1) opens a new file.
	// A last line lands in the old file after the rename.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendLog(t, path+".1", logEntryLine(5))
	sink.expect(t, logHumanLine(5))
	sink.expectNothing(t)
	appendLog(t, path, logEntryLine(6), logEntryLine(7))
	sink.expect(t, logHumanLine(6), logHumanLine(7))
	appendLog(t, path+".1", logEntryLine(99)) // the old file is done with
	appendLog(t, path, logEntryLine(8))
	sink.expect(t, logHumanLine(8))
	sink.expectNothing(t)
}

func TestLogsFollowCopyTruncate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gearshift.log")
	appendLog(t, path, logEntryLine(1), logEntryLine(2))
	sink := startFollow(t, path, nil)
	sink.expect(t, logHumanLine(1), logHumanLine(2))
	appendLog(t, path, logEntryLine(3))
	sink.expect(t, logHumanLine(3))

	// logrotate copytruncate: copy away, truncate in place; the daemon
	// keeps writing (O_APPEND) into the same file.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path+".1", b, 0o640)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	sink.expectNothing(t)
	appendLog(t, path, logEntryLine(4))
	sink.expect(t, logHumanLine(4))
	appendLog(t, path, logEntryLine(5), logEntryLine(6))
	sink.expect(t, logHumanLine(5), logHumanLine(6))
	sink.expectNothing(t)
}

func TestLogsFollowFiltersAndPartialLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gearshift.log")
	sink := startFollow(t, path, func(o *logOptions) { o.transitions = true }) // no file yet: waited for
	appendLog(t, path, `{"level":"info","ts":1796050800,"msg":"gearshift starting"}`)
	sink.expectNothing(t)
	// An entry written in two pieces is printed once, whole.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := logEntryLine(1) + "\n"
	f.WriteString(e[:30])
	sink.expectNothing(t)
	f.WriteString(e[30:])
	f.Close()
	sink.expect(t, logHumanLine(1))
}

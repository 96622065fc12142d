package logging

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestReaderReadsWhatTheWriterWrote logs through the daemon's logger into a
// file and reads it back as `gearshift logs` does: the transition filter
// and the human format rely on the names StateChange writes.
func TestReaderReadsWhatTheWriterWrote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gearshift.log")
	lf, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log := New(lf, nil, zap.NewAtomicLevelAt(zap.InfoLevel))
	log.Info("gearshift starting", zap.String("version", "0.1.0"))
	StateChange(log, "light", "heavy", "load_per_cpu 1.82 >= 1.50 for 3 samples",
		zap.Float64("load_per_cpu", 1.82), zap.Bool(FieldForced, false), zap.Float64(FieldSwitchMS, 0.413))
	log.Warn("varnish unreachable", zap.String("target", "127.0.0.1:6082"), zap.Error(os.ErrDeadlineExceeded))
	StateChange(log, "heavy", "moderate", "stay rule of heavy not held within 120s (load_per_cpu 0.90 < 1.00)")
	if err := lf.Close(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		flt   Filter
		limit int
		want  []string // each printed line, after the timestamp
	}{
		{"transitions", Filter{Transitions: true}, 0, []string{
			"light → heavy        load_per_cpu 1.82 >= 1.50 for 3 samples  (switch 0.41 ms)",
			"heavy → moderate     stay rule of heavy not held within 120s (load_per_cpu 0.90 < 1.00)",
		}},
		{"last two of all", Filter{}, 2, []string{
			"WARN   varnish unreachable  target=127.0.0.1:6082  error=\"i/o timeout\"",
			"heavy → moderate     stay rule of heavy not held within 120s (load_per_cpu 0.90 < 1.00)",
		}},
		{"since the future", Filter{Since: time.Now().Add(time.Hour)}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var out bytes.Buffer
			flt := tc.flt
			fm := &Formatter{W: &out, Loc: time.UTC}
			if _, err := Tail(f, tc.limit, &flt, fm.Print); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(tc.want), out.String())
			}
			for i, l := range lines {
				if len(l) < 21 || l[21:] != tc.want[i] {
					t.Errorf("line %d = %q, want the time then %q", i, l, tc.want[i])
				}
			}
		})
	}
}

// TestFollowReadsAppendedLines follows a log while the writer appends to it.
func TestFollowReadsAppendedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gearshift.log")
	lf, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	log := New(lf, nil, zap.NewAtomicLevelAt(zap.InfoLevel))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan Entry, 10)
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, path, 0, 5*time.Millisecond, func(line []byte) {
			if e, ok := ParseEntry(line); ok {
				got <- e
			}
		})
	}()
	StateChange(log, "light", "moderate", "test")
	select {
	case e := <-got:
		if e.Str(keyMsg) != MsgStateChange || e.Str(FieldFrom) != "light" || e.Str(FieldTo) != "moderate" {
			t.Errorf("followed entry %v", e)
		}
	case <-ctx.Done():
		t.Fatal("the appended transition was not followed")
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Follow returned %v, want context.Canceled", err)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	local := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04:05", s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name, in string
		want     time.Time
		bad      bool
	}{
		{"duration", "90m", now.Add(-90 * time.Minute), false},
		{"negative duration", "-1h", now.Add(-time.Hour), false},
		{"rfc 3339", "2026-11-30T14:00:00Z", time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC), false},
		{"local date and time", "2026-11-30 14:05", local("2026-11-30 14:05:00"), false},
		{"local date", "2026-11-29", local("2026-11-29 00:00:00"), false},
		{"neither", "yesterday-ish", time.Time{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSince(tc.in, now)
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), "want a duration such as 1h") {
					t.Errorf("ParseSince(%q) = %v, %v; want an error saying what it takes", tc.in, got, err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Errorf("ParseSince(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestFormatterEscapesControlBytes: a field written by the daemon from
// what a hostile admin port said (an active_vcl name with an escape
// sequence) cannot move the cursor, retitle or clear the terminal: the
// human format shows every non-printable byte as \xNN.
func TestFormatterEscapesControlBytes(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"ESC in a field", `{"level":"warn","ts":0,"msg":"foreign vcl","active_vcl":"x\u001b[2J\u001b]0;owned\u0007"}`,
			`WARN   foreign vcl  active_vcl=x\x1b[2J\x1b]0;owned\x07`},
		{"CR in the message", `{"level":"info","ts":0,"msg":"all fine\rGONE"}`,
			`INFO   all fine\x0dGONE`},
		{"in a transition", `{"level":"info","ts":0,"msg":"state change","from":"light","to":"heavy","reason":"r\u001bc","error":"e\u009bm"}`,
			`light → heavy        r\x1bc  error: e\xc2\x9bm`},
		{"quoted value", `{"level":"info","ts":0,"msg":"m","k":"a b\u001b"}`,
			`INFO   m  k="a b\x1b"`},
		{"not JSON, invalid UTF-8", "panic: \xff\xfe\x1b[31mred\x00",
			`panic: \xff\xfe\x1b[31mred\x00`},
		{"printable text is kept", `{"level":"info","ts":0,"msg":"élan → 東京","k":"tab\there"}`,
			"INFO   élan → 東京  k=\"tab\\there\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			(&Formatter{W: &out, Loc: time.UTC}).Print([]byte(tc.line + "\n"))
			got := strings.TrimSuffix(out.String(), "\n")
			if strings.HasPrefix(tc.line, "{") {
				if len(got) < 21 {
					t.Fatalf("printed %q", got)
				}
				got = got[21:]
			}
			if got != tc.want {
				t.Errorf("printed\n %q\nwant\n %q", got, tc.want)
			}
			for _, c := range []byte(out.String()) {
				if c < 0x20 && c != '\n' || c == 0x7f {
					t.Errorf("printed control byte %#x in %q", c, out.String())
				}
			}
		})
	}
}

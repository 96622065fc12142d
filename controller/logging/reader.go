package logging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/internal/numfmt"
)

// StateChange logs a gear change at Info, the way `gearshift logs
// --transitions` reads it: from, to and reason, then fields (the signals,
// forced, switch_ms).
func StateChange(log *zap.Logger, from, to, reason string, fields ...zap.Field) {
	log.Info(MsgStateChange, append([]zap.Field{
		zap.String(FieldFrom, from), zap.String(FieldTo, to), zap.String(FieldReason, reason),
	}, fields...)...)
}

// Entry is one JSON line of the daemon's log (docs/operating.md#logs).
type Entry map[string]any

func ParseEntry(line []byte) (Entry, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, false
	}
	var e Entry
	if json.Unmarshal(line, &e) != nil {
		return nil, false
	}
	return e, true
}

// time reads ts, written by zap as epoch seconds or as an ISO 8601 string.
func (e Entry) Time() (time.Time, bool) {
	switch v := e[keyTime].(type) {
	case float64:
		sec, frac := math.Modf(v)
		return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3), true
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z0700"} {
			if t, err := time.Parse(layout, v); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

func (e Entry) Str(k string) string {
	switch v := e[k].(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// Filter keeps the entries asked for. A line that is not JSON (a
// panic's trace, say) is no gear change, and goes with the entry before it
// for --since.
type Filter struct {
	Transitions bool      // only gear changes
	Since       time.Time // only entries from then on; zero: all
	lastKept    bool
}

func (f *Filter) Keep(line []byte) bool {
	e, ok := ParseEntry(line)
	if !ok {
		return !f.Transitions && (f.Since.IsZero() || f.lastKept)
	}
	keep := true
	if f.Transitions && e.Str(keyMsg) != MsgStateChange {
		keep = false
	}
	if !f.Since.IsZero() {
		if t, ok := e.Time(); ok && t.Before(f.Since) {
			keep = false
		}
	}
	f.lastKept = keep
	return keep
}

// ParseSince reads the start of a time window, as `logs --since` takes it:
// a duration back from now (1h, 30m; the sign is ignored) or a time, RFC
// 3339 or a local date and time ("2026-11-30 14:00", "2026-11-30").
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			d = -d
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want a duration such as 1h or 30m, or a time such as 2026-11-30T14:00:00Z")
}

// Tail prints the last limit lines of r that flt keeps (all when
// limit is 0) and returns the offset just past the last complete line.
func Tail(r io.Reader, limit int, flt *Filter, print func([]byte)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var ring [][]byte
	var offset int64
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			offset += int64(len(line))
			if flt.Keep(line) {
				if limit == 0 {
					print(line)
				} else {
					if len(ring) == limit {
						ring = ring[1:]
					}
					ring = append(ring, line)
				}
			}
		}
		// A last line without its newline is still being written: -f
		// reads it again, whole, from offset.
		if err == io.EOF {
			break
		}
		if err != nil {
			return offset, err
		}
	}
	for _, l := range ring {
		print(l)
	}
	return offset, nil
}

// Follow calls emit for every complete line appended to path from offset
// on, until ctx is done. It looks every poll: when the file shrinks
// (copytruncate) it reads again from the start; when path names another
// file (rename, then a new file), it finishes the old one and moves on to
// the new one from its start. A missing file is waited for.
func Follow(ctx context.Context, path string, offset int64, poll time.Duration, emit func([]byte)) error {
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var partial []byte
	buf := make([]byte, 64<<10)
	// drain reads what f holds past offset and emits the complete lines.
	drain := func() error {
		for {
			n, err := f.ReadAt(buf, offset)
			if n > 0 {
				offset += int64(n)
				data := append(partial, buf[:n]...)
				for {
					i := bytes.IndexByte(data, '\n')
					if i < 0 {
						break
					}
					emit(data[:i+1])
					data = data[i+1:]
				}
				partial = append([]byte(nil), data...)
			}
			if err == io.EOF || n == 0 {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if f == nil {
			nf, err := os.Open(path)
			switch {
			case err == nil:
				f = nf
			case !errors.Is(err, os.ErrNotExist):
				return fmt.Errorf("open log: %w", err)
			}
		}
		if f != nil {
			open, err := f.Stat()
			if err != nil {
				return err
			}
			if open.Size() < offset {
				// Truncated in place (logrotate copytruncate): start over.
				offset, partial = 0, nil
			}
			if err := drain(); err != nil {
				return fmt.Errorf("read %s: %w", path, err)
			}
			if cur, err := os.Stat(path); err == nil && !os.SameFile(open, cur) {
				// Renamed away and replaced: the old file is finished
				// (drained above, and once more for a last write racing the
				// rename); go on with the new one from its start.
				if err := drain(); err != nil {
					return err
				}
				if len(partial) > 0 {
					emit(append(partial, '\n'))
				}
				f.Close()
				f, offset, partial = nil, 0, nil
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Formatter prints entries for a human, or raw with json.
type Formatter struct {
	W    io.Writer
	JSON bool           // print the lines as they are
	Loc  *time.Location // where times are shown
}

// Fields shown in a transition's own words, or never shown.
var logSkip = map[string]bool{keyTime: true, keyLevel: true, keyMsg: true, keyCaller: true, keyName: true, keyStacktrace: true}

func (p *Formatter) Print(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if p.JSON {
		fmt.Fprintf(p.W, "%s\n", line)
		return
	}
	e, ok := ParseEntry(line)
	if !ok {
		fmt.Fprintf(p.W, "%s\n", Escape(string(line)))
		return
	}
	ts := "                   "
	if t, ok := e.Time(); ok {
		ts = t.In(p.Loc).Format("2006-01-02 15:04:05")
	}
	var b strings.Builder
	b.WriteString(ts)
	b.WriteString("  ")
	if e.Str(keyMsg) == MsgStateChange {
		fmt.Fprintf(&b, "%-19s", e.Str(FieldFrom)+" → "+e.Str(FieldTo))
		if r := e.Str(FieldReason); r != "" {
			b.WriteString("  " + r)
		}
		if ms, ok := e[FieldSwitchMS].(float64); ok {
			fmt.Fprintf(&b, "  (switch %s ms)", numfmt.Trim(ms, 2))
		}
		if errS := e.Str(FieldError); errS != "" {
			b.WriteString("  error: " + errS)
		}
	} else {
		fmt.Fprintf(&b, "%-5s  %s", strings.ToUpper(e.Str(keyLevel)), e.Str(keyMsg))
		var keys []string
		for k := range e {
			if !logSkip[k] && k != FieldError {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		if _, ok := e[FieldError]; ok {
			keys = append(keys, FieldError)
		}
		for _, k := range keys {
			v := e.Str(k)
			if v == "" || strings.ContainsAny(v, " \t\"=") {
				v = strconv.Quote(v)
			}
			b.WriteString("  " + k + "=" + v)
		}
	}
	fmt.Fprintln(p.W, Escape(strings.TrimRight(b.String(), " ")))
}

// Escape makes s safe to print on a terminal: every byte that is not part
// of a printable UTF-8 character (control characters such as ESC, CR and
// BEL, C1 controls, invalid UTF-8) is written as a C-style \xNN escape, the
// way journalctl shows unprintable log data. A field from a hostile admin
// port (an active_vcl name) thus cannot rewrite the screen.
func Escape(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsPrint(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, n := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && n <= 1 || !unicode.IsPrint(r) {
			for _, c := range []byte(s[:n]) {
				fmt.Fprintf(&b, "\\x%02x", c)
			}
		} else {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// LastError returns what the log at path says went wrong after offset (where it
// ended when the daemon was started): the last error entry, or else the
// last line that is not JSON (the daemon's last words on stderr, a panic).
func LastError(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	var lastErr, lastRaw string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil {
			if line != "" {
				lastRaw = strings.TrimSuffix(strings.TrimPrefix(line, "gearshift: "), ".")
			}
			continue
		}
		if lvl, _ := e[keyLevel].(string); lvl == "error" || lvl == "fatal" || lvl == "panic" {
			lastErr, _ = e[keyMsg].(string)
			if s, ok := e[FieldError].(string); ok && s != "" {
				lastErr += ": " + s
			}
		}
	}
	if lastErr != "" {
		return lastErr
	}
	return lastRaw
}

package main

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
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// logOptions are the flags of `gearshift logs`.
type logOptions struct {
	follow      bool
	lines       int
	linesSet    bool
	transitions bool
	since       string
	json        bool

	poll time.Duration  // how often -f looks for new lines and rotation
	loc  *time.Location // where times are shown
	now  func() time.Time
}

func newLogsCmd(a *app) *cobra.Command {
	o := logOptions{poll: 250 * time.Millisecond, loc: time.Local, now: time.Now}
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Show the daemon's log, human-formatted; -f follows it across log rotation",
		Long: `Show the daemon's log file (log.file in the config): the last -n entries,
one line each, with gear changes as "light → heavy" with their reason and
switch time. --transitions keeps only gear changes, --since only recent
entries (a duration such as 1h, or a time such as 2026-11-30T14:00:00Z),
--json prints the raw JSON lines. -f keeps following the file, across
logrotate's rename and copytruncate alike.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			o.linesSet = cmd.Flags().Changed("lines")
			ctx, stop := signal.NotifyContext(ctxOrBackground(cmd.Context()), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, _ := a.daemonConfig()
			if cfg.Log.File == "" {
				return exitUsage, errors.New("log.file is empty in the config: the daemon logs to stderr only (see journalctl -u gearshift)")
			}
			return a.logs(ctx, cfg.Log.File, o)
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new entries as they are written")
	f.IntVarP(&o.lines, "lines", "n", 20, "how many of the last entries to print (0: all)")
	f.BoolVar(&o.transitions, "transitions", false, "only gear changes")
	f.StringVar(&o.since, "since", "", "only entries since this long ago (1h, 30m) or this time (RFC 3339)")
	f.BoolVar(&o.json, "json", false, "print the raw JSON lines")
	return cmd
}

func (a *app) logs(ctx context.Context, path string, o logOptions) (int, error) {
	if o.lines < 0 {
		return exitUsage, fmt.Errorf("-n must be 0 (all) or more, got %d", o.lines)
	}
	flt := logFilter{transitions: o.transitions}
	if o.since != "" {
		t, err := parseSince(o.since, o.now())
		if err != nil {
			return exitUsage, err
		}
		flt.since = t
	}
	limit := o.lines
	if o.since != "" && !o.linesSet {
		limit = 0 // --since alone: everything since then
	}
	fmtr := &logFormatter{w: a.stdout, json: o.json, loc: o.loc}

	f, err := os.Open(path)
	if err != nil && !(o.follow && errors.Is(err, os.ErrNotExist)) {
		if errors.Is(err, os.ErrNotExist) {
			return exitFailure, fmt.Errorf("log file %s does not exist: has the daemon run with this config?", path)
		}
		return exitFailure, fmt.Errorf("open log: %w", err)
	}
	var offset int64
	if f != nil {
		offset, err = tailEntries(f, limit, &flt, fmtr.print)
		f.Close()
		if err != nil {
			return exitFailure, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if !o.follow {
		return exitOK, nil
	}
	err = followLog(ctx, path, offset, o.poll, func(line []byte) {
		if flt.keep(line) {
			fmtr.print(line)
		}
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return exitFailure, err
	}
	return exitOK, nil
}

func parseSince(s string, now time.Time) (time.Time, error) {
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
	return time.Time{}, fmt.Errorf("--since %q: want a duration such as 1h or 30m, or a time such as 2026-11-30T14:00:00Z", s)
}

// logEntry is one zap JSON line of the daemon's log (SPEC section 10).
type logEntry map[string]any

func parseEntry(line []byte) (logEntry, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, false
	}
	var e logEntry
	if json.Unmarshal(line, &e) != nil {
		return nil, false
	}
	return e, true
}

// time reads ts, written by zap as epoch seconds or as an ISO 8601 string.
func (e logEntry) time() (time.Time, bool) {
	switch v := e["ts"].(type) {
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

func (e logEntry) str(k string) string {
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

// logFilter keeps the entries asked for. A line that is not JSON (a
// panic's trace, say) is no gear change, and goes with the entry before it
// for --since.
type logFilter struct {
	transitions bool
	since       time.Time
	lastKept    bool
}

func (f *logFilter) keep(line []byte) bool {
	e, ok := parseEntry(line)
	if !ok {
		return !f.transitions && (f.since.IsZero() || f.lastKept)
	}
	keep := true
	if f.transitions && e.str("msg") != "state change" {
		keep = false
	}
	if !f.since.IsZero() {
		if t, ok := e.time(); ok && t.Before(f.since) {
			keep = false
		}
	}
	f.lastKept = keep
	return keep
}

// tailEntries prints the last limit lines of r that flt keeps (all when
// limit is 0) and returns the offset just past the last complete line.
func tailEntries(r io.Reader, limit int, flt *logFilter, print func([]byte)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var ring [][]byte
	var offset int64
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			offset += int64(len(line))
			if flt.keep(line) {
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

// followLog calls emit for every complete line appended to path from offset
// on, until ctx is done. It looks every poll: when the file shrinks
// (copytruncate) it reads again from the start; when path names another
// file (rename, then a new file), it finishes the old one and moves on to
// the new one from its start. A missing file is waited for.
func followLog(ctx context.Context, path string, offset int64, poll time.Duration, emit func([]byte)) error {
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

// logFormatter prints entries for a human, or raw with json.
type logFormatter struct {
	w    io.Writer
	json bool
	loc  *time.Location
}

// Fields shown in a transition's own words, or never shown.
var logSkip = map[string]bool{"ts": true, "level": true, "msg": true, "caller": true, "logger": true, "stacktrace": true}

func (p *logFormatter) print(line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if p.json {
		fmt.Fprintf(p.w, "%s\n", line)
		return
	}
	e, ok := parseEntry(line)
	if !ok {
		fmt.Fprintf(p.w, "%s\n", line)
		return
	}
	ts := "                   "
	if t, ok := e.time(); ok {
		ts = t.In(p.loc).Format("2006-01-02 15:04:05")
	}
	var b strings.Builder
	b.WriteString(ts)
	b.WriteString("  ")
	if e.str("msg") == "state change" {
		fmt.Fprintf(&b, "%-19s", e.str("from")+" → "+e.str("to"))
		if r := e.str("reason"); r != "" {
			b.WriteString("  " + r)
		}
		if ms, ok := e["switch_ms"].(float64); ok {
			fmt.Fprintf(&b, "  (switch %s ms)", opsNum(ms, 2))
		}
		if errS := e.str("error"); errS != "" {
			b.WriteString("  error: " + errS)
		}
	} else {
		fmt.Fprintf(&b, "%-5s  %s", strings.ToUpper(e.str("level")), e.str("msg"))
		var keys []string
		for k := range e {
			if !logSkip[k] && k != "error" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		if _, ok := e["error"]; ok {
			keys = append(keys, "error")
		}
		for _, k := range keys {
			v := e.str(k)
			if v == "" || strings.ContainsAny(v, " \t\"=") {
				v = strconv.Quote(v)
			}
			b.WriteString("  " + k + "=" + v)
		}
	}
	fmt.Fprintln(p.w, strings.TrimRight(b.String(), " "))
}

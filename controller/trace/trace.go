// Package trace is the CSV format of recorded samples: a trace's columns
// (the flight recorder's included), its reader, and the stream of samples
// every replay reads (Source). Package replay replays them.
package trace

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
)

// Sample is one row of a trace.
type Sample struct {
	Line    int       // line in the file, for messages
	Time    time.Time // seconds are counted from the Unix epoch
	Text    string    // the time as written in the file
	Load5   *float64  // not used by the machine; kept for completeness
	Load15  *float64
	Reading state.Reading
	// Recorded is what the daemon did at this sample, in a trace its
	// flight recorder wrote (see RecordedColumns); nil in other traces.
	Recorded *Recorded
}

// Recorded is the decision the daemon made at a sample and the Varnish
// traffic of the poll, as the flight recorder writes them beside the
// sample's figures.
type Recorded struct {
	Gear     state.Gear
	Forced   bool     // the gear was forced (mode "forced"), not decided
	Reason   string   // the machine's reason for the gear
	SwitchMS *float64 // the switch's time when the gear changed at this sample
	Incident string   // the incident in course: an id per climb above light; "" in light
	// Rates is Varnish's traffic over the poll, summed over the targets
	// with a name, by column (sensor.RecordedRates: hit_rps, …); nil
	// when unknown.
	Rates map[string]float64
	// GuestPages counts the pages heavy shares as guest pages
	// (profiles.guest_pages); nil when off.
	GuestPages *float64
	// Sites are the sites' gears and backend requests (SiteColumns), in
	// the config's order; nil without a sites key. A site in the
	// lightest gear, in auto and without backend requests may be left
	// out.
	Sites []Site
	// SiteFetches tells whether the sites' backend requests were known.
	SiteFetches bool
	// SiteFetchesAll is the sum of every site's backend requests when
	// the record lists only the sites with the most (MaxSiteFetches);
	// 0 when it lists every site that had any (see SiteFetchTotal).
	SiteFetchesAll float64
}

// RecordedColumns are the columns the flight recorder adds to a trace, in
// the order it writes them.
var RecordedColumns = slices.Concat([]string{"gear", "mode", "reason", "switch_ms", "incident"}, sensor.RecordedRates(), []string{"guest_pages"})

// Trace is a whole CSV trace, read by Parse.
type Trace struct {
	Samples  []Sample
	CPUs     string   // where the CPU count came from: "from the cpus column", or Parse's cpusFrom
	Warnings []string // columns that were ignored
}

// Error is a row or header that cannot be read, located in the file.
type Error struct {
	Line   int
	Column int    // 1-based; 0 when the error is about the whole line
	Name   string // the column's name, when known
	Err    error
}

func (e *Error) Error() string {
	switch {
	case e.Column > 0 && e.Name != "":
		return fmt.Sprintf("line %d, column %d (%s): %v", e.Line, e.Column, e.Name, e.Err)
	case e.Column > 0:
		return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// columns lists the known columns besides the signals', with the names
// sar/sadf use for the same figures.
var columns = map[string]string{
	"time": "time", "timestamp": "time",
	"load1": "load1", "ldavg-1": "load1",
	"load5": "load5", "ldavg-5": "load5",
	"load15": "load15", "ldavg-15": "load15",
	"runnable": "runnable", "runq-sz": "runnable",
	"blocked": "blocked", // sar -q: added to runq-sz, as Runnable counts blocked tasks
	"cpus":    "cpus",
}

func init() {
	for _, c := range RecordedColumns {
		columns[c] = c
	}
}

// column returns the column named key: one of columns, or a raw signal of
// set (mem_available_pct, psi_cpu, …).
func column(set *state.Set, key string) (string, bool) {
	if col, ok := columns[key]; ok {
		return col, true
	}
	if sig, ok := set.Lookup(key); ok && sig.Raw() {
		return sig.Name, true
	}
	return "", false
}

// Reader reads a CSV trace one sample at a time: a header row naming the
// columns, then one sample per row. "time" (RFC 3339, "2006-01-02 15:04:05
// [zone]", or seconds) and "load1" are required; "load5", "load15",
// "runnable", "cpus" and every signal of the set that is a raw
// figure ("mem_available_pct", "psi_cpu", "psi_mem", …) are optional, and
// a signal's cell must be within the signal's range; an empty cell is a figure the row does not have. A row
// without "runnable" feeds the fast signal with load1. sar's names are
// understood too: "timestamp", "ldavg-1", "ldavg-5", "ldavg-15", "runq-sz",
// and "blocked", which is added to the run queue. The delimiter is a comma,
// or a semicolon as sadf -d writes; a header starting with "#" (sadf) is read
// too, and other lines starting with "#" are comments.
type Reader struct {
	CPUs     string   // where the CPU count came from: "from the cpus column", or NewReader's cpusFrom
	Warnings []string // columns that are ignored

	set         *state.Set
	cr          *csv.Reader
	names       []string
	index       map[string]int
	headerLine  int
	cpus        int
	secondsMode bool
	prev        *Sample
}

// NewReader reads the header of the trace in r, whose signal columns are
// the raw signals of set. Rows without a cpus figure get cpus, which came
// from cpusFrom ("from --cpus").
func NewReader(r io.Reader, set *state.Set, cpus int, cpusFrom string) (*Reader, error) {
	br := bufio.NewReader(&lineLimiter{r: r})
	header, headerLine, err := firstLine(br)
	if err != nil {
		return nil, err
	}
	delim := ','
	if !strings.Contains(header, ",") && strings.Contains(header, ";") {
		delim = ';'
	}
	hr := csv.NewReader(strings.NewReader(strings.TrimPrefix(strings.TrimSpace(header), "#")))
	hr.Comma = delim
	names, err := hr.Read()
	if err != nil {
		return nil, &Error{Line: headerLine, Err: fmt.Errorf("read the header: %w", err)}
	}

	t := &Reader{CPUs: cpusFrom, set: set, names: names, index: map[string]int{}, headerLine: headerLine, cpus: cpus}
	for i, n := range names {
		key := strings.ToLower(strings.TrimSpace(n))
		col, ok := column(set, key)
		if !ok {
			t.Warnings = append(t.Warnings, fmt.Sprintf("line %d, column %d: ignoring unknown column %q", headerLine, i+1, strings.TrimSpace(n)))
			continue
		}
		if j, dup := t.index[col]; dup {
			return nil, &Error{Line: headerLine, Column: i + 1, Name: key, Err: fmt.Errorf("%s is already column %d", col, j+1)}
		}
		t.index[col] = i
	}
	for _, req := range []string{"time", "load1"} {
		if _, ok := t.index[req]; !ok {
			return nil, &Error{Line: headerLine, Err: fmt.Errorf("the header has no %q column (want at least time and load1, got %s)", req, strings.Join(names, string(delim)))}
		}
	}
	if _, ok := t.index["cpus"]; ok {
		t.CPUs = "from the cpus column"
	}

	t.cr = csv.NewReader(br)
	t.cr.Comma = delim
	t.cr.Comment = '#'
	t.cr.FieldsPerRecord = len(names)
	t.cr.TrimLeadingSpace = true
	t.cr.ReuseRecord = true
	return t, nil
}

// Next returns the next sample, or io.EOF after the last one. A trace with
// no sample at all is an error.
func (t *Reader) Next() (Sample, error) {
	rec, err := t.cr.Read()
	if err == io.EOF {
		if t.prev == nil {
			return Sample{}, &Error{Line: t.headerLine, Err: errors.New("no samples after the header")}
		}
		return Sample{}, io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			if errors.Is(pe.Err, csv.ErrFieldCount) {
				return Sample{}, &Error{Line: pe.StartLine + t.headerLine, Err: fmt.Errorf("%d fields, the header has %d", len(rec), len(t.names))}
			}
			return Sample{}, &Error{Line: pe.Line + t.headerLine, Column: pe.Column, Err: pe.Err}
		}
		return Sample{}, err
	}
	line, _ := t.cr.FieldPos(0)
	s, err := t.sample(rowReader{rec: rec, index: t.index, line: line + t.headerLine})
	if err != nil {
		return Sample{}, err
	}
	t.prev = &s
	return s, nil
}

func (t *Reader) sample(row rowReader) (Sample, error) {
	index := row.index
	s := Sample{Line: row.line}
	s.Text = strings.TrimSpace(row.rec[index["time"]])
	tm, secs, err := parseTime(s.Text)
	if err != nil {
		return s, row.errorf("time", "%w", err)
	}
	if t.prev == nil {
		t.secondsMode = secs
	} else if secs != t.secondsMode {
		return s, row.errorf("time", "%q mixes seconds and dates: earlier rows use %s", s.Text, map[bool]string{true: "seconds", false: "dates"}[t.secondsMode])
	}
	if t.prev != nil && !tm.After(t.prev.Time) {
		return s, row.errorf("time", "%s is not after the previous row's %s (line %d): rows must be in time order", s.Text, t.prev.Text, t.prev.Line)
	}
	s.Time = tm

	load1, err := row.number("load1", 0, math.Inf(1))
	if err != nil {
		return s, err
	}
	if load1 == nil {
		return s, row.errorf("load1", "empty: every row needs load1")
	}
	if s.Load5, err = row.number("load5", 0, math.Inf(1)); err != nil {
		return s, err
	}
	if s.Load15, err = row.number("load15", 0, math.Inf(1)); err != nil {
		return s, err
	}
	runq, err := row.number("runnable", 0, math.Inf(1))
	if err != nil {
		return s, err
	}
	blocked, err := row.number("blocked", 0, math.Inf(1))
	if err != nil {
		return s, err
	}
	switch {
	case runq == nil:
		runq = load1
	case blocked != nil:
		v := *runq + *blocked
		runq = &v
	}
	cpus := t.cpus
	if c, err := row.number("cpus", 1, math.Inf(1)); err != nil {
		return s, err
	} else if c != nil {
		if *c != math.Trunc(*c) {
			return s, row.errorf("cpus", "%v is not a whole number", *c)
		}
		cpus = int(min(*c, 1<<20))
	}
	s.Reading = state.Reading{Time: tm, Load1: *load1, RunQueue: *runq, CPUs: cpus, Values: map[string]float64{}}
	if s.Recorded, err = recorded(row); err != nil {
		return s, err
	}
	for _, sig := range t.set.All() {
		if !sig.Raw() {
			continue
		}
		v, err := row.number(sig.Name, sig.Min, sig.Max)
		if err != nil {
			return s, err
		}
		if v != nil {
			s.Reading.Values[sig.Name] = *v
		}
	}
	return s, nil
}

// Parse reads a whole trace (see Reader) into memory.
func Parse(r io.Reader, set *state.Set, cpus int, cpusFrom string) (*Trace, error) {
	rd, err := NewReader(r, set, cpus, cpusFrom)
	if err != nil {
		return nil, err
	}
	t := &Trace{CPUs: rd.CPUs, Warnings: rd.Warnings}
	for {
		s, err := rd.Next()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		t.Samples = append(t.Samples, s)
	}
}

// MaxLineBytes bounds a line of a trace: a row is a handful of figures, so
// a longer line (a file of zeros, a binary) is refused rather than read
// into memory whole.
const MaxLineBytes = 64 << 10

// lineLimiter passes r through until a line exceeds MaxLineBytes, then
// fails with an *Error naming that line.
type lineLimiter struct {
	r    io.Reader
	line int // complete lines passed
	n    int // bytes of the current line passed
	err  error
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			l.line, l.n = l.line+1, 0
			continue
		}
		if l.n++; l.n > MaxLineBytes {
			l.err = &Error{Line: l.line + 1, Err: fmt.Errorf("longer than %d KiB: a trace row is a handful of figures (is this a CSV trace?)", MaxLineBytes>>10)}
			return i, nil
		}
	}
	return n, err
}

// utf8BOM is the byte order mark spreadsheet programs write at the start
// of a CSV export.
const utf8BOM = "\ufeff"

// firstLine returns the header: the first line that is not blank and not a
// comment ("#" followed by a line without delimiters).
func firstLine(br *bufio.Reader) (string, int, error) {
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return "", n, err
		}
		if n == 1 {
			line = strings.TrimPrefix(line, utf8BOM)
		}
		if trimmed := strings.TrimSpace(line); trimmed != "" {
			if !strings.HasPrefix(trimmed, "#") || strings.ContainsAny(trimmed, ",;") {
				return line, n, nil
			}
		}
		if err == io.EOF {
			return "", n, &Error{Line: n, Err: errors.New("empty trace: want a header row such as time,load1")}
		}
	}
}

// timeLayouts are the date formats accepted besides seconds.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05 MST", // sadf -d
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
}

// parseTime reads RFC 3339, a "2006-01-02 15:04:05" date, or seconds (from
// the Unix epoch, or from any origin: only differences matter).
func parseTime(s string) (t time.Time, seconds bool, err error) {
	if s == "" {
		return time.Time{}, false, errors.New("empty: every row needs a time")
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e12 {
			return time.Time{}, true, fmt.Errorf("%q is out of range for seconds", s)
		}
		return time.Unix(0, 0).UTC().Add(time.Duration(v * float64(time.Second))), true, nil
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, false, nil
		}
	}
	return time.Time{}, false, fmt.Errorf("%q is neither RFC 3339 (2026-11-30T03:00:00Z) nor seconds", s)
}

type rowReader struct {
	rec   []string
	index map[string]int
	line  int
}

func (r rowReader) errorf(col, format string, args ...any) error {
	i := r.index[col]
	return &Error{Line: r.line, Column: i + 1, Name: col, Err: fmt.Errorf(format, args...)}
}

// number reads the optional column col: nil when the trace has no such
// column or the cell is empty.
func (r rowReader) number(col string, lo, hi float64) (*float64, error) {
	i, ok := r.index[col]
	if !ok {
		return nil, nil
	}
	cell := strings.TrimSpace(r.rec[i])
	if cell == "" {
		return nil, nil
	}
	v, err := strconv.ParseFloat(cell, 64)
	if err != nil || math.IsNaN(v) {
		return nil, r.errorf(col, "%q is not a number", cell)
	}
	if v < lo || v > hi {
		switch {
		case math.IsInf(hi, 1) && lo == 0:
			return nil, r.errorf(col, "%s is negative", cell)
		case math.IsInf(hi, 1):
			return nil, r.errorf(col, "%s is below %g", cell, lo)
		}
		return nil, r.errorf(col, "%s is out of range %g to %g", cell, lo, hi)
	}
	return &v, nil
}

// recorded reads the flight recorder's columns of row: nil when the trace
// has no gear column.
func recorded(row rowReader) (*Recorded, error) {
	i, ok := row.index["gear"]
	if !ok {
		return nil, nil
	}
	gear, err := state.Parse(strings.TrimSpace(row.rec[i]))
	if err != nil {
		return nil, row.errorf("gear", "%w", err)
	}
	r := &Recorded{Gear: gear, Reason: row.text("reason"), Incident: row.text("incident")}
	switch mode := row.text("mode"); mode {
	case "", "auto":
	case "forced":
		r.Forced = true
	default:
		return nil, row.errorf("mode", "%q is neither auto nor forced", mode)
	}
	for _, f := range []struct {
		col string
		dst **float64
	}{{"switch_ms", &r.SwitchMS}, {"guest_pages", &r.GuestPages}} {
		if *f.dst, err = row.number(f.col, 0, math.Inf(1)); err != nil {
			return nil, err
		}
	}
	if err := recordedSites(row, r); err != nil {
		return nil, err
	}
	for _, col := range sensor.RecordedRates() {
		v, err := row.number(col, 0, math.Inf(1))
		if err != nil {
			return nil, err
		}
		if v != nil {
			if r.Rates == nil {
				r.Rates = map[string]float64{}
			}
			r.Rates[col] = *v
		}
	}
	return r, nil
}

// text is the optional column col, trimmed: "" when the trace has none.
func (r rowReader) text(col string) string {
	if i, ok := r.index[col]; ok {
		return strings.TrimSpace(r.rec[i])
	}
	return ""
}

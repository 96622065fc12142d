package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// DefaultSince is the period `gearshift report` tells without --since,
// --from or --to: the last day.
const DefaultSince = 24 * time.Hour

// Options are what `gearshift report` is asked.
type Options struct {
	Dir string     // the history directory
	Set *state.Set // the signals the records are read with (the config's)
	Now time.Time  // the end of a period given by Since

	// The period: the last Since before Now, or From to To as typed
	// (TimeLayouts; "" leaves that end open). Neither: DefaultSince.
	Since    time.Duration
	From, To string
	Location *time.Location // of a From or To without a zone; nil: time.Local

	JSON     bool   // JSON rather than text on stdout
	SVG, PNG string // a file to draw the chart in ("": none)
}

// UsageError is a request Run cannot make sense of: a bad time, or flags
// that exclude each other.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// TimeLayouts are the layouts --from and --to accept: RFC 3339, or a date
// and time of day in the local time zone.
var TimeLayouts = []string{time.RFC3339, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

// ParseTime reads s in one of TimeLayouts, in loc when s has no zone.
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	for _, l := range TimeLayouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2026-12-01T03:00:00Z) nor a local \"2006-01-02 15:04\"", s)
}

// period resolves the options' period; a zero time is an open end.
func (o Options) period() (from, to time.Time, err error) {
	if o.Since < 0 {
		return from, to, usage("--since %s: must be positive", o.Since)
	}
	if o.Since > 0 && (o.From != "" || o.To != "") {
		return from, to, usage("--since and --from/--to exclude each other")
	}
	if o.From == "" && o.To == "" {
		since := o.Since
		if since == 0 {
			since = DefaultSince
		}
		return o.Now.Add(-since), time.Time{}, nil
	}
	loc := o.Location
	if loc == nil {
		loc = time.Local
	}
	for _, b := range []struct {
		flag, s string
		t       *time.Time
	}{{"--from", o.From, &from}, {"--to", o.To, &to}} {
		if b.s == "" {
			continue
		}
		if *b.t, err = ParseTime(b.s, loc); err != nil {
			return from, to, usage("%s %w", b.flag, err)
		}
	}
	if !to.IsZero() && !to.After(from) {
		return from, to, usage("--to %s is not after --from %s", o.To, o.From)
	}
	return from, to, nil
}

// Run reads the history of the period in o.Dir and writes the report (text
// or JSON) to stdout, the chart to its file, and the lines of history it
// had to skip to stderr. Errors of the request are *UsageError; no history
// or no record in the period is an error that says where it looked.
func Run(o Options, stdout, stderr io.Writer) error {
	from, to, err := o.period()
	if err != nil {
		return err
	}
	if o.SVG != "" && o.PNG != "" {
		return usage("--svg and --png exclude each other")
	}
	src, err := OpenPeriod(o.Dir, o.Set, from, to)
	if err != nil {
		return err
	}
	defer src.Close()

	var (
		r       *Report
		samples []trace.Sample
	)
	if o.SVG != "" || o.PNG != "" {
		// The chart wants every record; the report alone reads them one
		// at a time.
		if samples, err = history.Collect(src); err == nil {
			r, err = New(samples, o.Set)
		}
	} else {
		r, err = build(src, o.Set)
	}
	for _, w := range src.Warnings() {
		fmt.Fprintf(stderr, "gearshift: history %s\n", w)
	}
	if errors.Is(err, ErrEmpty) {
		return EmptyError(o.Dir, from, to)
	}
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	r.Source = o.Dir

	if o.JSON {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	switch {
	case o.SVG != "":
		return WriteChartFile(o.SVG, false, samples, o.Set, ChartOptions{Title: r.title()})
	case o.PNG != "":
		return WriteChartFile(o.PNG, true, samples, o.Set, ChartOptions{Title: r.title()})
	}
	return nil
}

// build reads src into a report, one record at a time.
func build(src trace.Source, set *state.Set) (*Report, error) {
	b := NewBuilder(set)
	if err := trace.Each(src, b.Add); err != nil {
		return nil, err
	}
	return b.Report()
}

// describe says what period was asked: "from 2026-12-01 03:00:00 UTC on".
// OpenPeriod opens the records of the history directory dir from from to
// to (a zero time: an open end). A config that records nothing (dir "")
// is a usage error.
func OpenPeriod(dir string, set *state.Set, from, to time.Time) (*history.Source, error) {
	if dir == "" {
		return nil, usage("no history directory: history.dir is empty (recording is off); give --dir")
	}
	return history.Open(dir, set, from, to)
}

// EmptyError says that dir has no record from from to to (ErrEmpty's
// sentence for people).
func EmptyError(dir string, from, to time.Time) error {
	return fmt.Errorf("no records in %s %s", dir, describe(from, to))
}

func describe(from, to time.Time) string {
	const layout = "2006-01-02 15:04:05 MST"
	switch {
	case from.IsZero():
		return "before " + to.UTC().Format(layout)
	case to.IsZero():
		return "from " + from.UTC().Format(layout) + " on"
	}
	return "from " + from.UTC().Format(layout) + " to " + to.UTC().Format(layout)
}

func (r *Report) title() string {
	return fmt.Sprintf("gearshift, %s to %s UTC", r.From.UTC().Format("2006-01-02 15:04"), r.To.UTC().Format("2006-01-02 15:04"))
}

// WriteChartFile writes the chart of samples (see SVG) to path, as PNG
// when png is set, else SVG; a file left half written is removed.
func WriteChartFile(path string, png bool, samples []trace.Sample, set *state.Set, opt ChartOptions) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	write := SVG
	if png {
		write = PNG
	}
	if err := write(f, samples, set, opt); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

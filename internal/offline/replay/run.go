package replay

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/report"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// DefaultSince is the period `gearshift simulate --history` replays
// without --since.
const DefaultSince = 7 * 24 * time.Hour

// Help says what `gearshift simulate --history` does, for its help.
var Help = fmt.Sprintf(`With --history, replay the flight recorder's records of the last --since
(from --dir, else the config's history.dir) under the config given with
--config, the candidate, and print what it would have done next to what
the daemon did: the transitions it adds, removes and moves, and the time in
each gear. A recorded and a replayed transition between the same gears at
most %s apart are one, moved. The replay starts in the recorded gear, is
forced wherever the recorded gear was forced (those periods are listed),
and resumes in its own gear after a gap in the recording. --svg or --png
draws the chart of the period with the candidate's gears as a second band.
A history with sites replays each site too, through the daemon's allocator
on the recorded backend requests, a site pinned on its own pinned where it
was: each site's time above light and transitions, and the replayed site
shifts.`, timefmt.Round(Tolerance))

// RunOptions are what `gearshift simulate --history` is asked.
type RunOptions struct {
	Dir        string         // the history directory
	Config     *config.Config // the candidate: its signals, rules, hysteresis and fast_window
	ConfigName string         // the candidate's path, or "embedded defaults"
	Now        time.Time      // the end of the period
	Since      time.Duration  // the period before Now; 0: DefaultSince
	JSON       bool           // JSON rather than text on stdout
	SVG, PNG   string         // a file to draw the chart in ("": none)
}

// Run replays the history of the period under the candidate and writes
// the comparison to stdout, the chart to its file, and the lines of
// history it had to skip to stderr. Errors of the request are
// *report.UsageError; no history in the period is an error that says
// where it looked.
func Run(o RunOptions, stdout, stderr io.Writer) error {
	if o.SVG != "" && o.PNG != "" {
		return usage("--svg and --png exclude each other")
	}
	set, err := o.Config.Signals()
	if err != nil {
		return err
	}
	src, from, err := openHistory(o.Dir, set, o.Now, o.Since, DefaultSince)
	if err != nil {
		return err
	}
	defer src.Close()
	opts := Options{}
	if o.SVG != "" || o.PNG != "" {
		opts.Chart = report.MaxPoints
	}
	h := Heading{History: o.Dir, Config: o.ConfigName, FastWindow: time.Duration(o.Config.FastWindow), Machine: o.Config.StateConfig(set)}
	c, err := Compare(src, h.Machine, h.FastWindow, opts)
	if err != nil {
		return historyError(o.Dir, from, err)
	}
	h.Warnings = src.Warnings()
	if o.JSON {
		err = c.WriteJSON(stdout, h)
	} else {
		err = c.WriteText(stdout, h)
	}
	if err != nil {
		return err
	}
	chart := report.ChartOptions{
		Title:     fmt.Sprintf("gearshift, %s to %s UTC, replayed under %s", c.From.UTC().Format("2006-01-02 15:04"), c.To.UTC().Format("2006-01-02 15:04"), o.ConfigName),
		Candidate: c.ChartCandidate,
	}
	switch {
	case o.SVG != "":
		return report.WriteChartFile(o.SVG, false, c.Chart, set, chart)
	case o.PNG != "":
		return report.WriteChartFile(o.PNG, true, c.Chart, set, chart)
	}
	return nil
}

// openHistory opens the records of dir over the last since before now
// (def when since is 0).
func openHistory(dir string, set *state.Set, now time.Time, since, def time.Duration) (*history.Source, time.Time, error) {
	if since < 0 {
		return nil, time.Time{}, usage("--since %s: must be positive", since)
	}
	if since == 0 {
		since = def
	}
	from := now.Add(-since)
	src, err := report.OpenPeriod(dir, set, from, time.Time{})
	return src, from, err
}

func historyError(dir string, from time.Time, err error) error {
	if errors.Is(err, report.ErrEmpty) {
		return report.EmptyError(dir, from, time.Time{})
	}
	var te *trace.Error
	if errors.As(err, &te) {
		return fmt.Errorf("read history %s, %w", dir, err)
	}
	return fmt.Errorf("read history %s: %w", dir, err)
}

func usage(format string, args ...any) error {
	return &report.UsageError{Err: fmt.Errorf(format, args...)}
}

package replay

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/jsonfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// TraceShift is one change of gear during a replay.
type TraceShift struct {
	Offset   time.Duration // since the first sample
	Sample   trace.Sample
	From, To state.Gear
	Reason   string
}

// TraceResult is the outcome of a replay.
type TraceResult struct {
	Samples          int
	Duration         time.Duration // from the first sample to the last
	CPUsMin, CPUsMax int           // CPU counts the load was divided by
	Transitions      []TraceShift
	TimeIn           [len(state.All)]time.Duration // time spent in each gear
	Peak             Extreme                       // highest load_per_cpu
	LowMem           *Extreme                      // lowest mem_available_pct; nil when the trace has none
}

// Extreme is the most extreme value of a signal and where it was seen.
type Extreme struct {
	Value  float64
	Offset time.Duration
}

// ReplayTrace feeds the samples of src, in order, to m, and stops at the first
// error of src. The gear decided at a sample holds until the next one, so
// the last sample adds no time.
func ReplayTrace(m *state.Machine, src trace.Source) (TraceResult, error) {
	var (
		res         TraceResult
		first, prev trace.Sample
		gear        state.Gear
	)
	err := trace.Each(src, func(s trace.Sample) error {
		if res.Samples == 0 {
			first = s
			res.CPUsMin, res.CPUsMax = s.Reading.CPUs, s.Reading.CPUs
		} else {
			res.TimeIn[gear] += s.Time.Sub(prev.Time)
		}
		res.Samples++
		off := s.Time.Sub(first.Time)
		res.Duration = off
		res.CPUsMin, res.CPUsMax = min(res.CPUsMin, s.Reading.CPUs), max(res.CPUsMax, s.Reading.CPUs)

		d := m.Step(s.Time, s.Reading)
		if d.Changed {
			res.Transitions = append(res.Transitions, TraceShift{Offset: off, Sample: s, From: d.From, To: d.Gear, Reason: d.Reason})
		}
		if v, _ := d.Signals.Get("load_per_cpu"); res.Samples == 1 || v > res.Peak.Value {
			res.Peak = Extreme{v, off}
		}
		if v, ok := d.Signals.Get("mem_available_pct"); ok && (res.LowMem == nil || v < res.LowMem.Value) {
			res.LowMem = &Extreme{v, off}
		}
		gear, prev = d.Gear, s
		return nil
	})
	return res, err
}

// TraceHeading is what the report says before the replay: the trace and the
// config it was replayed with.
type TraceHeading struct {
	Trace      string        // the trace's name: its path, or "standard input"
	CPUsFrom   string        // where the CPU count came from (Reader.CPUs)
	Config     string        // the config's path, or "embedded defaults"
	FastWindow time.Duration // fast_window
	Machine    state.Config  // the hysteresis replayed
}

// WriteText writes the report of `gearshift simulate`: the heading, each
// transition, the time spent in each gear, and the extremes of the load
// and of the memory.
func (r TraceResult) WriteText(w io.Writer, h TraceHeading) {
	fmt.Fprintf(w, "Trace %s: %d sample%s over %s, %s.\n", h.Trace, r.Samples, plural(r.Samples), timefmt.Round(r.Duration), r.cpuNote(h.CPUsFrom))
	fmt.Fprintf(w, "Config: %s; fast_window %s, up_confirm %d, down_window %s, min_dwell %s.\n\n",
		h.Config, timefmt.Round(h.FastWindow), h.Machine.UpConfirm, timefmt.Round(h.Machine.DownWindow), timefmt.Round(h.Machine.MinDwell))
	if len(r.Transitions) == 0 {
		fmt.Fprintf(w, "No transitions: light throughout.\n\n")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "OFFSET\tTIME\tSHIFT\tREASON")
		for _, t := range r.Transitions {
			fmt.Fprintf(tw, "%s\t%s\t%s → %s\t%s\n", timefmt.Offset(t.Offset), t.Sample.Text, t.From, t.To, t.Reason)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}

	width := len("TIME")
	for _, d := range append(r.TimeIn[:], r.Duration) {
		width = max(width, len(timefmt.Round(d)))
	}
	fmt.Fprintf(w, "%-8s  %*s  %6s\n", "GEAR", width, "TIME", "SHARE")
	for _, st := range state.All {
		fmt.Fprintf(w, "%-8s  %*s  %6s\n", st, width, timefmt.Round(r.TimeIn[st]), timefmt.Share(r.TimeIn[st], r.Duration))
	}
	fmt.Fprintf(w, "%-8s  %*s  %d transition%s\n", "total", width, timefmt.Round(r.Duration), len(r.Transitions), plural(len(r.Transitions)))
	fmt.Fprintf(w, "\nPeak load_per_cpu %.2f at %s", r.Peak.Value, timefmt.Offset(r.Peak.Offset))
	if r.LowMem != nil {
		fmt.Fprintf(w, "; lowest mem_available_pct %.1f at %s", r.LowMem.Value, timefmt.Offset(r.LowMem.Offset))
	}
	fmt.Fprintln(w, ".")
}

// cpuNote says how many CPUs the replay divided the load by, and why.
func (r TraceResult) cpuNote(from string) string {
	if r.CPUsMin == r.CPUsMax {
		return fmt.Sprintf("%d CPU%s (%s)", r.CPUsMin, plural(r.CPUsMin), from)
	}
	return fmt.Sprintf("%d to %d CPUs (%s)", r.CPUsMin, r.CPUsMax, from)
}

// traceJSON is the shape of simulate --json
// (docs/signals.md#tuning-thresholds-with-gearshift-simulate).
type traceJSON struct {
	Transitions []traceShiftJSON `json:"transitions"`
	Summary     struct {
		Samples     int                `json:"samples"`
		Transitions int                `json:"transitions"`
		SecondsIn   map[string]float64 `json:"seconds_in"`
	} `json:"summary"`
}

type traceShiftJSON struct {
	OffsetS float64 `json:"offset_s"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Reason  string  `json:"reason"`
}

// WriteJSON writes the result as `gearshift simulate --json` prints it.
func (r TraceResult) WriteJSON(w io.Writer) error {
	out := traceJSON{Transitions: []traceShiftJSON{}}
	for _, t := range r.Transitions {
		out.Transitions = append(out.Transitions, traceShiftJSON{
			OffsetS: t.Offset.Seconds(), From: t.From.String(), To: t.To.String(), Reason: t.Reason,
		})
	}
	out.Summary.Samples = r.Samples
	out.Summary.Transitions = len(r.Transitions)
	out.Summary.SecondsIn = map[string]float64{}
	for _, st := range state.All {
		out.Summary.SecondsIn[st.String()] = r.TimeIn[st].Seconds()
	}
	return jsonfmt.Write(w, out)
}

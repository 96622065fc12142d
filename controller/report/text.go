package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// stamp is how the text report writes a time; every time is in UTC, as the
// history's days are.
const stamp = "2006-01-02 15:04:05"

// WriteText writes the report for people: the period, the time in each
// gear, each transition with its reason, each incident with what the shift
// spared the backend, and the totals. It is meant to be pasted into a
// postmortem as it is.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	r.writeText(bw)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

func (r *Report) writeText(w io.Writer) {
	fmt.Fprintf(w, "gearshift report, %s to %s UTC (%s): %d record%s",
		r.From.UTC().Format(stamp), r.To.UTC().Format(stamp), timefmt.Round(r.To.Sub(r.From)), r.Samples, plural(r.Samples))
	if r.Source != "" {
		fmt.Fprintf(w, " from %s", r.Source)
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintln(w)

	recorded := r.To.Sub(r.From) - r.Unrecorded
	width := len("TIME")
	for _, d := range append(r.TimeIn[:], recorded) {
		width = max(width, len(timefmt.Round(d)))
	}
	fmt.Fprintf(w, "%-8s  %*s  %6s\n", "GEAR", width, "TIME", "SHARE")
	for _, st := range state.All {
		fmt.Fprintf(w, "%-8s  %*s  %6s\n", st, width, timefmt.Round(r.TimeIn[st]), timefmt.Share(r.TimeIn[st], recorded))
	}
	fmt.Fprintf(w, "%-8s  %*s\n", "recorded", width, timefmt.Round(recorded))
	var notes []string
	if r.Unrecorded > 0 {
		notes = append(notes, fmt.Sprintf("%s not recorded (the daemon was not running)", timefmt.Round(r.Unrecorded)))
	}
	if r.Forced > 0 {
		notes = append(notes, fmt.Sprintf("%s in a forced gear", timefmt.Round(r.Forced)))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "Besides: %s.\n", strings.Join(notes, "; "))
	}
	fmt.Fprintln(w)

	if len(r.Transitions) == 0 {
		fmt.Fprintf(w, "Transitions: none, %s throughout.\n\n", r.gearThroughout())
	} else {
		fmt.Fprintf(w, "Transitions (%d):\n", len(r.Transitions))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range r.Transitions {
			reason := t.Reason
			if t.Forced && !strings.Contains(reason, "forced") {
				reason = "forced: " + reason
			}
			fmt.Fprintf(tw, "  %s\t%s → %s\t%s\n", t.Time.UTC().Format(stamp), t.From, t.To, reason)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}

	if len(r.Incidents) == 0 {
		fmt.Fprintf(w, "Incidents: none.\n\n")
	} else {
		fmt.Fprintf(w, "Incidents (%d):\n", len(r.Incidents))
		for i := range r.Incidents {
			r.writeIncident(w, &r.Incidents[i])
		}
		fmt.Fprintln(w)
	}
	r.writeSiteText(w)

	fmt.Fprintf(w, "Totals: %d transition%s, %d incident%s, %s above light.\n",
		len(r.Transitions), plural(len(r.Transitions)), len(r.Incidents), plural(len(r.Incidents)), timefmt.Round(r.Above()))
	if !r.Traffic {
		fmt.Fprintln(w, "Requests: not recorded (no varnish target with a name).")
		return
	}
	fmt.Fprintf(w, "Requests: %s served, %s reached the backend (%s)", numfmt.Count(r.Requests), numfmt.Count(r.Backend), ratio(r.Backend, r.Requests))
	if len(r.Incidents) > 0 {
		fmt.Fprintf(w, "; the shifts spared it about %s", numfmt.Count(r.Saved()))
	}
	fmt.Fprintln(w, ".")
}

func (r *Report) writeIncident(w io.Writer, in *Incident) {
	start := in.Start.UTC().Format(stamp)
	if in.StartedBefore {
		start = "before " + start
	}
	var end string
	switch {
	case in.Ongoing:
		end = "still above light at the end of the period"
	case in.Interrupted:
		end = "recording stopped at " + in.Last.UTC().Format(stamp)
	default:
		end = "back in light at " + in.End.UTC().Format(stamp)
	}
	fmt.Fprintf(w, "  %s: from %s, %s; %s above light", in.ID, start, end, timefmt.Round(in.Duration()))
	if in.Heavy {
		fmt.Fprintf(w, ", heavy after %s", timefmt.Round(in.ToHeavy))
	} else {
		fmt.Fprintf(w, ", %s at most", in.Peak)
	}
	fmt.Fprintln(w, ".")
	if peaks := r.peaks(in); peaks != "" {
		fmt.Fprintf(w, "    peak %s.\n", peaks)
	}
	if len(in.Sites) > 0 {
		fmt.Fprintf(w, "    sites: %s.\n", siteSurgesText(in.Sites))
	}
	if in.Requests > 0 {
		fmt.Fprintf(w, "    %s requests served, %s reached the backend, about %s would have without the shift: %s spared (%s).\n",
			numfmt.Count(in.Requests), numfmt.Count(in.Backend), numfmt.Count(in.WithoutShift), numfmt.Count(in.Saved()), ratio(in.Saved(), in.WithoutShift))
	}
}

// peaks lists the worst value of each signal of an incident, in the order
// of the set: "load_per_cpu 3.20, mem_available_pct 12.0%, client_rps 900".
func (r *Report) peaks(in *Incident) string {
	var parts []string
	for _, sig := range r.set.All() {
		// A signal that rose no higher than 0 tells nothing.
		if v, ok := in.Worst[sig.Name]; ok && (v != 0 || sig.Direction == state.Falls) {
			parts = append(parts, sig.Name+" "+sig.Format(v))
		}
	}
	return strings.Join(parts, ", ")
}

// gearThroughout is the gear of a period without transitions.
func (r *Report) gearThroughout() string {
	for _, st := range state.All {
		if r.TimeIn[st] > 0 {
			return st.String()
		}
	}
	return "one gear"
}

func ratio(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*part/whole)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

package api

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// WriteText writes the status as `gearshift status` shows it: what an
// operator needs at 3 AM, in the order they ask for it. set describes the
// signals (the config's), th adds the thresholds next to them (nil:
// unknown). Times are shown in now's location.
func (s *Status) WriteText(w io.Writer, set *state.Set, th *state.Config, now time.Time) {
	loc := now.Location()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()

	gear := strings.ToUpper(s.State)
	switch {
	case s.Mode == "forced" && s.ForcedUntil != nil:
		gear += fmt.Sprintf("   forced by operator until %s (%s left; `gearshift auto` releases it)",
			timefmt.Clock(s.ForcedUntil.In(now.Location()), now, true), timefmt.Coarse(s.ForcedUntil.Sub(now)))
	case s.Mode == "forced":
		gear += "   forced by operator until `gearshift auto`"
	default:
		gear += "   auto"
	}
	fmt.Fprintf(tw, "gear\t%s\n", gear)
	fmt.Fprintf(tw, "since\t%s (%s ago), %d transitions since start\n",
		s.Since.In(loc).Format(timefmt.Stamp), timefmt.Coarse(now.Sub(s.Since)), s.Transitions)
	fmt.Fprintf(tw, "why\t%s\n", s.Reason)
	s.writeSitesBlock(tw, now)

	if sm := s.Sample; sm != nil {
		for _, l := range signalLines(sm, set, th) {
			fmt.Fprintf(tw, "%s\t%s\n", l[0], l[1])
		}
		fmt.Fprintf(tw, "load\t%.2f %.2f %.2f, %s runnable, %d CPUs (sampled %s ago)\n",
			sm.Load1, sm.Load5, sm.Load15, numfmt.Trim(sm.Runnable, 2), sm.CPUs, timefmt.Coarse(now.Sub(sm.Time)))
	} else {
		fmt.Fprintf(tw, "inputs\tno sample yet\n")
	}

	for i, t := range s.Targets {
		label := ""
		if i == 0 {
			label = "varnish"
		}
		var line string
		on := "active " + orNone(t.ActiveVCL)
		if s.VarnishMode == config.ModeLabel {
			on = "label " + profiles.Label + " on " + orNone(t.LabelVCL) + " (active " + orNone(t.ActiveVCL) + ")"
		}
		switch {
		case !t.Reachable:
			line = fmt.Sprintf("%s  UNREACHABLE: %s", t.Admin, oneLine(t.Error))
		case !t.InSync:
			line = fmt.Sprintf("%s  NOT IN SYNC, %s", t.Admin, on)
			if t.Error != "" {
				line += ": " + oneLine(t.Error)
			}
		default:
			line = fmt.Sprintf("%s  in sync, %s", t.Admin, on)
		}
		if t.LastSwitchMS > 0 {
			line += fmt.Sprintf(", last switch %.2f ms", t.LastSwitchMS)
		}
		if t.Reachable && t.Child != "" && t.Child != "running" {
			line += ", CHILD " + strings.ToUpper(oneLine(t.Child)) + ": nothing is served (varnishadm start)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, line)
	}
	if len(s.Targets) == 0 {
		fmt.Fprintf(tw, "varnish\tno targets configured\n")
	}
	if s.Advice != "" {
		fmt.Fprintf(tw, "advice\t%s\n", oneLine(s.Advice))
	}
	if line := guestLine(s); line != "" {
		fmt.Fprintf(tw, "guest pages\t%s\n", line)
	}
	if s.OverBudget > 0 {
		fmt.Fprintf(tw, "over budget\t%d requests refused in the last minute (%s): profiles.client_budget\n",
			s.OverBudget, oneLine(strings.Join(s.OverBudgetClients, ", ")))
	}
	if s.GuestError != "" {
		fmt.Fprintf(tw, "guest pages\tOFF: %s\n", oneLine(s.GuestError))
	}
	if f := s.FrontDoor; f != nil {
		fmt.Fprintf(tw, "front door\t%d direct, %d by PROXY protocol, %d forwarded, %d unidentified in the last minute\n",
			f.Direct, f.ProxyProtocol, f.Forwarded, f.Unidentified)
	}
	if s.HistoryError != "" {
		fmt.Fprintf(tw, "history\tNOT RECORDING (gears still shift): %s\n", oneLine(s.HistoryError))
	}
	if s.ConfigError != "" {
		fmt.Fprintf(tw, "config\tRELOAD FAILED, previous config still in force: %s\n", oneLine(s.ConfigError))
	}
	fmt.Fprintf(tw, "daemon\tgearshift %s, up %s\n", s.Version, timefmt.Coarse(time.Duration(s.UptimeSeconds)*time.Second))
}

// signalLines renders the signals of the sample as rows of label and text,
// in the order of set; signals that share a row are shown side by
// side ("cpu 12.5%, mem 0.0%"). A row none of whose signals is available
// says so, or is left out.
func signalLines(sm *SampleStatus, set *state.Set, th *state.Config) [][2]string {
	type row struct {
		label, absent string
		parts         []string
		any           bool
	}
	var rows []*row
	byLabel := map[string]*row{}
	for _, sig := range set.All() {
		r := byLabel[sig.Line()]
		if r == nil {
			r = &row{label: sig.Line()}
			byLabel[r.label] = r
			rows = append(rows, r)
		}
		if sig.StatusAbsent != "" {
			r.absent = sig.StatusAbsent
		}
		text := "n/a"
		if v, ok := sm.Signal(sig.Name); ok {
			text, r.any = sig.Format(v), true
		}
		if sig.StatusPart != "" {
			text = sig.StatusPart + " " + text
		}
		r.parts = append(r.parts, text+thresholds(sig, th))
	}
	var out [][2]string
	for _, r := range rows {
		switch {
		case r.any:
			out = append(out, [2]string{r.label, strings.Join(r.parts, ", ")})
		case r.absent != "":
			out = append(out, [2]string{r.label, r.absent})
		}
	}
	return out
}

// thresholds renders the enter/stay limits of each gear on one signal, e.g.
// "   (moderate >= 0.70, stays >= 0.50; heavy >= 1.50, stays >= 1.00)";
// "" when th is nil or sets none.
func thresholds(sig state.Signal, th *state.Config) string {
	if th == nil {
		return ""
	}
	limit := func(v float64) string {
		s := sig.FormatLimit(v)
		if sig.Unit == "%" {
			s += "%"
		}
		return s
	}
	op := sig.Op()
	var parts []string
	for st := state.Lightest + 1; st <= state.Heaviest; st++ {
		b := th.Bands[st]
		enter, okE := b.Enter[sig.Name]
		stay, okS := b.Stay[sig.Name]
		switch {
		case okE && okS:
			parts = append(parts, fmt.Sprintf("%s %s %s, stays %s %s", st, op, limit(enter), op, limit(stay)))
		case okE:
			parts = append(parts, fmt.Sprintf("%s %s %s", st, op, limit(enter)))
		case okS:
			parts = append(parts, fmt.Sprintf("%s stays %s %s", st, op, limit(stay)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "   (" + strings.Join(parts, "; ") + ")"
}

// guestLine says what heavy shares as guest pages: "12 shared, 3 found
// private (shop.example/login, …)"; "" when the daemon found none.
func guestLine(s *Status) string {
	if s.GuestPages == 0 && s.GuestPrivate == 0 {
		return ""
	}
	line := fmt.Sprintf("%d shared, %d found private", s.GuestPages, s.GuestPrivate)
	if len(s.GuestPrivateURLs) > 0 {
		urls := strings.Join(s.GuestPrivateURLs, ", ")
		if s.GuestPrivate > len(s.GuestPrivateURLs) {
			urls += ", …"
		}
		line += " (" + oneLine(urls) + ")"
	}
	return line
}

// oneLine keeps a table row on one line: a VCL compiler's message runs over
// many lines (status --json and the log have it as it is).
func oneLine(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if r := []rune(msg); len(r) > 240 {
		msg = string(r[:240]) + " …"
	}
	return msg
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// WriteApplied writes the gear the daemon is in after a force or auto, and
// each target's profile, and returns the targets that did not follow.
func (s *Status) WriteApplied(w io.Writer) (notInSync []string) {
	switch {
	case s.Mode == "forced" && s.ForcedUntil != nil:
		fmt.Fprintf(w, "gear %s, forced until %s\n", s.State, s.ForcedUntil.Local().Format(timefmt.Stamp))
	case s.Mode == "forced":
		fmt.Fprintf(w, "gear %s, forced until `gearshift auto`\n", s.State)
	default:
		fmt.Fprintf(w, "gear %s, auto: %s\n", s.State, s.Reason)
	}
	return s.writeTargetsApplied(w)
}

// writeTargetsApplied writes each target's profile after a force or auto,
// and returns the targets that did not follow.
func (s *Status) writeTargetsApplied(w io.Writer) (notInSync []string) {
	for _, t := range s.Targets {
		if t.InSync {
			// In label mode the gear is the label's VCL; the active VCL
			// is the operator's own.
			vcl := t.ActiveVCL
			if s.VarnishMode == "label" {
				vcl = t.LabelVCL
			}
			fmt.Fprintf(w, "  %s: %s (%.2f ms)\n", t.Admin, vcl, t.LastSwitchMS)
			continue
		}
		fmt.Fprintf(w, "  %s: NOT IN SYNC: %s\n", t.Admin, cmp.Or(t.Error, "(none)"))
		notInSync = append(notInSync, t.Admin)
	}
	return notInSync
}

package controller

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/hooks"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// When a gear above light does not keep requests off the backend, the
// daemon reads a few seconds of the Varnish log and says why, and which
// setting would change it. It never changes the config itself.
const (
	// AdviceShare is the backend_share at or above which a gear above
	// light is not doing its work: a working heavy sends a few percent.
	AdviceShare = 0.3
	// adviceRead is how long the Varnish log is read for one advice.
	adviceRead = 5 * time.Second
	// adviceSecond is the least share a second reason needs to be named.
	adviceSecond = 0.1
)

// SnapshotFunc reads what reached a target's backend for a while: top.Snapshot.
type SnapshotFunc func(ctx context.Context, name string, d time.Duration) (top.Summary, error)

// adviser follows backend_share above light and, once it has stayed high
// for a while (hysteresis.min_dwell: the least time a gear is given), reads
// the log of the first target with a name, at most once per while, off the
// loop. Owned by the loop.
type adviser struct {
	read   SnapshotFunc
	target string // varnishd's -n; "": no advice
	log    *zap.Logger
	guests func() bool // profiles.guest_pages is auto in the config in force

	highSince time.Time // backend_share has been high since; zero: it is not
	lowSince  time.Time // with advice in force, backend_share has been low since; zero: it is not
	running   bool
	lastRead  time.Time // when the last read ended
	fails     int
	results   chan adviceResult

	line     string // the advice in force; "" when none
	incident string // the last advice given since the gear left light

	climbs        map[string][]siteClimb // each site's climbs out of light (siteadvice.go)
	sites         string                 // the sites' advice in force; "" when none
	sitesIncident string                 // the last sites' advice since a site left light
	sitesAbove    bool                   // a site was above light at the last followSites
}

type adviceResult struct {
	sum    top.Summary
	err    error
	gear   state.Gear
	in     time.Duration // time in the gear when the read began
	share  float64
	guests bool // guest_pages was on
}

func newAdviser(read SnapshotFunc, target string, log *zap.Logger) *adviser {
	return &adviser{read: read, target: target, log: log, results: make(chan adviceResult, 1)}
}

// step follows the decision d, taken at now on the loop's clock, after
// wait (the least time a gear is given).
func (a *adviser) step(ctx context.Context, now time.Time, d state.Decision, wait time.Duration) {
	if a.target == "" || a.read == nil {
		return
	}
	share, ok := d.Signals.Get(sensor.BackendShare)
	if d.Gear == state.Lightest {
		a.incident = ""
	}
	if d.Gear == state.Lightest {
		a.highSince, a.lowSince = time.Time{}, time.Time{}
		a.clear()
		return
	}
	if !ok || share < AdviceShare {
		// The advice goes once the share has stayed low for the wait: a
		// poll or two of little traffic (a small sample) is no cure.
		a.highSince = time.Time{}
		if a.lowSince.IsZero() {
			a.lowSince = now
		}
		if a.line == "" || now.Sub(a.lowSince) >= wait {
			a.clear()
		}
		return
	}
	a.lowSince = time.Time{}
	if a.highSince.IsZero() {
		a.highSince = now
	}
	if a.running || now.Sub(a.highSince) < wait || (!a.lastRead.IsZero() && now.Sub(a.lastRead) < wait) {
		return
	}
	a.running = true
	gear, in := d.Gear, now.Sub(d.Since)
	guests := a.guests != nil && a.guests()
	go func() {
		sum, err := a.read(ctx, a.target, adviceRead)
		a.results <- adviceResult{sum: sum, err: err, gear: gear, in: in + adviceRead, share: share, guests: guests}
	}()
}

// done takes a read's result back on the loop, at now.
func (a *adviser) done(now time.Time, r adviceResult) {
	a.running, a.lastRead = false, now
	if r.err != nil {
		a.fails++
		if logging.Worthy(a.fails) {
			a.log.Warn("read the Varnish log for advice", zap.String(logging.FieldSource, a.target), zap.Error(r.err),
				zap.Int(logging.FieldFailures, a.fails))
		}
		return
	}
	a.fails = 0
	if a.highSince.IsZero() {
		return // the share fell while the log was read
	}
	line := adviceLine(r)
	if line != "" && line != a.line {
		a.log.Warn("gear not effective", zap.String(logging.FieldAdvice, line))
	}
	a.line = line
	if line != "" {
		a.incident = line
	}
}

func (a *adviser) clear() {
	if a.line != "" {
		a.log.Info("gear effective again", zap.String(logging.FieldAdvice, a.line))
		a.line = ""
	}
}

// adviceLine says what still reaches the backend and what would change
// it: "heavy for 4m but 62 % of requests reach the backend: 41 % session
// (cookie _my_tracker) — add the cookie to profiles.ignore_cookies if it
// does not identify a user (analytics, consent, A/B tests); 29 % method
// POST /xmlrpc.php". "" when the log showed no backend request.
func adviceLine(r adviceResult) string {
	first, ok := r.sum.Top()
	if !ok {
		return ""
	}
	if first.Reason == top.Unknown {
		// The VCL in use logs no reason words: not gearshift's profiles
		// (a site's own VCL in label mode, a foreign one).
		return fmt.Sprintf("%s for %s but %.0f %% of requests reach the backend, for reasons the VCL in use does not log (gearshift's profiles log them: see gearshift top)",
			r.gear, timefmt.Short(r.in.Round(time.Second)), math.Round(r.share*100))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s for %s but %.0f %% of requests reach the backend: %s", r.gear,
		timefmt.Short(r.in.Round(time.Second)), math.Round(r.share*100), first)
	switch {
	case first.Reason == "set_cookie" && r.guests:
		// guest_pages already shares what is the same for every new
		// visitor: strip_set_cookies would share what differs.
		b.WriteString(" — " + guestSetting)
	case first.Setting != "":
		b.WriteString(" — " + first.Setting)
	}
	if len(r.sum.Reasons) > 1 && r.sum.Reasons[1].Share >= adviceSecond {
		b.WriteString("; " + r.sum.Reasons[1].String())
	}
	return b.String()
}

// budgetAdvice says which clients the profiles refused for their budget
// in the last minute (rs) and what to change when they are people, not a
// script: "" when none was. b is profiles.client_budget in force.
func budgetAdvice(rs top.RefusalStats, b profiles.Budget) string {
	if rs.Requests == 0 {
		return ""
	}
	return fmt.Sprintf("%d requests over profiles.client_budget (%g a second, %d at once) in the last minute got a stored copy or 429, most from %s — if one of these addresses is many people (a proxy or CDN in front of Varnish), list it in profiles.trusted_proxies; if it is one busy client you trust, raise the budget",
		rs.Requests, b.Rate, b.Burst, strings.Join(rs.Clients, ", "))
}

// joinAdvice joins the advice lines that are not "".
func joinAdvice(lines ...string) string {
	var out []string
	for _, l := range lines {
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; and ")
}

// guestSetting is the advice on set_cookie when guest_pages is on.
const guestSetting = "guest_pages already shares the pages that are the same for every new visitor; these differ for each (a form's token, the session id in the page: see guest_private_urls in the status) or were not checked yet: stop the site from starting a session on them"

// env is what a hook learns of the advice: the incident's last.
func (a *adviser) env() []string {
	line := joinAdvice(a.incident, a.sitesIncident)
	if line == "" {
		return nil
	}
	return []string{hooks.EnvAdvice + "=" + line}
}

// firstNamed is the -n of the first target with a name, "" for none.
func firstNamed(names []string) string {
	for _, n := range names {
		if n != "" {
			return n
		}
	}
	return ""
}

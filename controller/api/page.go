package api

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/report"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// The status page's defaults.
const (
	// PagePeriod is how much history the page reads and charts.
	PagePeriod = 3 * time.Hour
	// PageCacheFor is how long the history read for one request serves
	// the next ones: a refresh storm reads the files once per period.
	PageCacheFor = 5 * time.Second
	// PageRefresh is the page's refresh interval, in seconds.
	PageRefresh = 10
	// PageTransitions is the most transitions the page lists.
	PageTransitions = 20

	// The chart's size in points (report.ChartOptions): 1200 × 600 CSS pixels.
	chartWidth, chartHeight = 900, 450
)

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// PageOptions are what the status page reads.
type PageOptions struct {
	Status func() Status // the daemon's status; required; must be safe for concurrent use
	// Rules are the thresholds in force and, in their Signals, the
	// daemon's signal set; must be safe for concurrent use. nil: the
	// default config's signals, and no thresholds.
	Rules      func() state.Config
	HistoryDir string           // the flight recorder's directory (history.dir); "": history is off
	Period     time.Duration    // history read and charted; default PagePeriod
	CacheFor   time.Duration    // how long one read of the history serves; default PageCacheFor
	Now        func() time.Time // default time.Now
}

// Page is the status page: the gear and why, each site's gear when the
// config has sites, each signal against its thresholds, each target, the
// last hours of history as a chart and the recent transitions, as HTML
// that refreshes itself and needs no script.
// It answers GET and HEAD at "/" only.
type Page struct {
	opts PageOptions

	mu     sync.Mutex // held while the history is read: one reader at a time
	cached *pageHistory
}

var _ http.Handler = (*Page)(nil)

// NewPage returns the status page of opts.
func NewPage(opts PageOptions) *Page {
	if opts.Period <= 0 {
		opts.Period = PagePeriod
	}
	if opts.CacheFor <= 0 {
		opts.CacheFor = PageCacheFor
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Page{opts: opts}
}

// ServeHTTP serves the page at "/"; any other path is not found, and any
// method but GET and HEAD is not allowed.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the status page is read-only: use GET", http.StatusMethodNotAllowed)
		return
	}
	var body bytes.Buffer
	if err := pageTemplate.Execute(&body, p.view()); err != nil {
		http.Error(w, "render the status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	// No script runs on the page, nothing is loaded from elsewhere.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'")
	h.Set("Content-Length", fmt.Sprint(body.Len()))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body.Bytes())
}

// pageView is what the template renders.
type pageView struct {
	Refresh   int
	Gear      string // "HEAVY"
	GearClass string // the gear's name, for the style; "unknown" for another
	Mode      string // "auto", "forced until …"
	Since     string
	SinceAgo  string
	Switches  int // transitions since the daemon started
	Reason    string

	Sampled string      // how long ago the sample was taken; "" without one
	Signals [][2]string // label, value with its thresholds
	Load    string

	VarnishMode string
	Targets     []pageTarget

	ConfigError, LogError, HistoryError string
	Advice                              string // why a gear above light sends many requests to the backend
	Guests                              string // what heavy shares as guest pages; "" when none were found

	Sites []pageSite // nil while the default site is alone (no sites key)

	Period      string // "3h"
	Chart       template.HTML
	ChartNote   string
	Transitions []pageTransition
	TimeIn      []pageTimeIn // the gears the period spent time in
	Skipped     int          // history lines that could not be read

	Version, Uptime, Now string
}

type pageTarget struct {
	Admin    string
	State    string // "in sync", "NOT IN SYNC", "UNREACHABLE"
	Class    string // "ok", "bad"
	VCL      string
	Child    string // "" while running or unknown
	SwitchMS string
	Error    string
}

// pageSite is one row of the sites table.
type pageSite struct {
	Name, Hosts     string
	Gear, GearClass string // "moderate", "moderate"; the class is "unknown" for another gear
	Mode, Since     string
	Share, RPS      string // "71%", "12.3"; "–" while Varnish's counters cannot be read
	MaxConnections  string // "8"; "no site limit" for 0 (the backend's own still holds)
	Reason          string
}

// pageTransition is one change of gear found in the history.
type pageTransition struct {
	Time     string
	From, To string
	Mode     string
	Reason   string
}

func (p *Page) view() pageView {
	now := p.opts.Now()
	loc := now.Location()
	s := p.opts.Status()
	set, th := p.rules()

	v := pageView{
		Refresh:      PageRefresh,
		Gear:         strings.ToUpper(s.State),
		GearClass:    "unknown",
		Mode:         s.Mode,
		Since:        s.Since.In(loc).Format(timefmt.Stamp),
		SinceAgo:     timefmt.Coarse(now.Sub(s.Since)),
		Switches:     s.Transitions,
		Reason:       s.Reason,
		VarnishMode:  s.VarnishMode,
		ConfigError:  oneLine(s.ConfigError),
		LogError:     oneLine(s.LogError),
		HistoryError: oneLine(s.HistoryError),
		Advice:       oneLine(s.Advice),
		Guests:       guestLine(&s),
		Period:       timefmt.Short(p.opts.Period),
		Version:      s.Version,
		Uptime:       timefmt.Coarse(time.Duration(s.UptimeSeconds) * time.Second),
		Now:          now.Format(timefmt.Stamp),
	}
	if st, err := state.Parse(s.State); err == nil {
		v.GearClass = st.String()
	}
	switch {
	case s.Mode == "auto":
		v.Mode = "auto: the signals decide"
	case s.Mode == "forced" && s.ForcedUntil != nil:
		v.Mode = fmt.Sprintf("forced by the operator until %s (%s left)",
			timefmt.Clock(s.ForcedUntil.In(loc), now, true), timefmt.Coarse(s.ForcedUntil.Sub(now)))
	case s.Mode == "forced":
		v.Mode = "forced by the operator until `gearshift auto`"
	}
	if sm := s.Sample; sm != nil {
		v.Sampled = timefmt.Coarse(now.Sub(sm.Time))
		for _, l := range signalLines(sm, set, th) {
			v.Signals = append(v.Signals, [2]string{l[0], strings.TrimSpace(l[1])})
		}
		v.Load = fmt.Sprintf("%.2f %.2f %.2f, %g runnable, %d CPUs", sm.Load1, sm.Load5, sm.Load15, sm.Runnable, sm.CPUs)
	}
	for _, t := range s.Targets {
		v.Targets = append(v.Targets, pageTargetOf(t, s.VarnishMode))
	}
	if len(s.Sites) > 1 {
		for _, site := range s.Sites {
			v.Sites = append(v.Sites, pageSiteOf(site, now))
		}
	}

	h := p.history(now, set)
	v.Chart, v.ChartNote, v.Transitions, v.TimeIn, v.Skipped = h.chart, h.note, h.transitions, h.timeIn, h.skipped
	return v
}

func pageTargetOf(t TargetStatus, mode string) pageTarget {
	pt := pageTarget{Admin: t.Admin, State: "in sync", Class: "ok", VCL: orNone(t.ActiveVCL), Error: oneLine(t.Error)}
	if mode == config.ModeLabel {
		pt.VCL = "label " + profiles.Label + " → " + orNone(t.LabelVCL) + " (active " + orNone(t.ActiveVCL) + ")"
	}
	switch {
	case !t.Reachable:
		pt.State, pt.Class, pt.VCL = "UNREACHABLE", "bad", ""
	case !t.InSync:
		pt.State, pt.Class = "NOT IN SYNC", "bad"
	}
	if t.Reachable && t.Child != "" && t.Child != "running" {
		pt.Child = "CHILD " + strings.ToUpper(oneLine(t.Child)) + ": nothing is served (varnishadm start)"
		pt.Class = "bad"
	}
	if t.LastSwitchMS > 0 {
		pt.SwitchMS = fmt.Sprintf("%.2f ms", t.LastSwitchMS)
	}
	return pt
}

// pageSiteOf is the row of site, with times in now's location; the cells
// are those of `gearshift sites`, but for the dash of an unknown share.
func pageSiteOf(site SiteStatus, now time.Time) pageSite {
	ps := pageSite{
		Name: site.Name, Hosts: strings.Join(site.Hosts, ", "),
		Gear: site.Gear, GearClass: "unknown",
		Mode: site.modeCell(now), Since: site.sinceCell(now),
		Share: "–", RPS: "–", MaxConnections: "no site limit",
		Reason: oneLine(site.Reason),
	}
	if site.Name == config.DefaultSite {
		ps.Hosts = "every other host"
	}
	if st, err := state.Parse(site.Gear); err == nil {
		ps.GearClass = st.String()
	}
	if site.BackendShare != nil {
		ps.Share = site.shareCell()
	}
	if site.BackendRPS != nil {
		ps.RPS = numfmt.Trim(*site.BackendRPS, 1)
	}
	if site.MaxConnections > 0 {
		ps.MaxConnections = fmt.Sprint(site.MaxConnections)
	}
	return ps
}

// rules returns the signal set and the thresholds the page shows.
func (p *Page) rules() (*state.Set, *state.Config) {
	if p.opts.Rules == nil {
		return config.Default().ShownSignals(), nil
	}
	rules := p.opts.Rules()
	if rules.Signals == nil {
		rules.Signals = config.Default().ShownSignals()
	}
	return rules.Signals, &rules
}

// pageHistory is what the page shows of the history, read once for
// several requests.
type pageHistory struct {
	at          time.Time
	set         *state.Set
	chart       template.HTML
	note        string // why there is no chart
	transitions []pageTransition
	timeIn      []pageTimeIn
	skipped     int
}

// pageTimeIn is the time spent in one gear over the period.
type pageTimeIn struct{ Gear, For string }

// history returns the history of the period before now, read with the
// signals of set, or what an earlier request read less than CacheFor ago.
func (p *Page) history(now time.Time, set *state.Set) *pageHistory {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.cached; c != nil && c.set == set && !now.Before(c.at) && now.Sub(c.at) < p.opts.CacheFor {
		return c
	}
	p.cached = p.readHistory(now, set)
	return p.cached
}

func (p *Page) readHistory(now time.Time, set *state.Set) *pageHistory {
	h := &pageHistory{at: now, set: set}
	dir, period := p.opts.HistoryDir, timefmt.Short(p.opts.Period)
	if dir == "" {
		h.note = "No history: the flight recorder is off (history.dir is empty)."
		return h
	}
	files, err := history.List(dir)
	if err != nil {
		h.note = "Cannot read the history: " + oneLine(err.Error())
		return h
	}
	if len(files) == 0 {
		h.note = "No history yet: the daemon has recorded nothing in " + dir + "."
		return h
	}
	src, err := history.Open(dir, set, now.Add(-p.opts.Period), time.Time{})
	if err != nil {
		h.note = "No history in the last " + period + "."
		return h
	}
	samples, err := history.Collect(src)
	src.Close()
	h.skipped = src.Skipped()
	if err != nil && len(samples) == 0 {
		h.note = "Cannot read the history: " + oneLine(err.Error())
		return h
	}
	if len(samples) == 0 {
		h.note = "No history in the last " + period + "."
		return h
	}
	rep, err := report.New(samples, set)
	if err != nil {
		h.note = "Cannot read the history: " + oneLine(err.Error())
		return h
	}
	h.transitions = recent(rep.Transitions, now.Location(), now)
	for _, st := range state.All {
		if d := rep.TimeIn[st]; d > 0 {
			h.timeIn = append(h.timeIn, pageTimeIn{Gear: st.String(), For: timefmt.Coarse(d)})
		}
	}
	svg, err := report.InlineSVG(samples, set, report.ChartOptions{Width: chartWidth, Height: chartHeight})
	if err != nil {
		h.note = "Cannot draw the chart: " + oneLine(err.Error())
		return h
	}
	// The chart's text (signal names, times) is escaped by its SVG
	// writer; it carries no reason.
	h.chart = template.HTML(svg)
	return h
}

// recent returns the last PageTransitions of ts, the newest first.
func recent(ts []report.Transition, loc *time.Location, now time.Time) []pageTransition {
	out := make([]pageTransition, 0, min(len(ts), PageTransitions))
	for i := len(ts) - 1; i >= 0 && len(out) < PageTransitions; i-- {
		t := ts[i]
		mode := "auto"
		if t.Forced {
			mode = "forced"
		}
		out = append(out, pageTransition{
			Time: timefmt.Clock(t.Time.In(loc), now, true),
			From: t.From.String(), To: t.To.String(), Mode: mode, Reason: t.Reason,
		})
	}
	return out
}

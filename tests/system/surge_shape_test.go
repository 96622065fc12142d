package system

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// The surge's shapes (SHAPE): step is 0.4's, quiet then SURGE_FACTOR × C
// at once for SURGE_FOR; ramp climbs from quiet to the peak over 2 ×
// SURGE_FOR and decays over 3 × SURGE_FOR (a front page); bursts are
// three bursts of SURGE_FOR at the peak, SURGE_FOR quiet between them (a
// newsletter, then a retweet). Shapes other than step run the daemon in
// auto alone (shapeSurge): where hysteresis, not speed, decides.
const (
	shapeStep   = "step"
	shapeRamp   = "ramp"
	shapeBursts = "bursts"
)

// ratePoint is an arrival rate at a time from the start.
type ratePoint struct {
	at   time.Duration
	rate float64 // requests per second
}

// shapedPacer paces vegeta through a piecewise-linear arrival rate: the
// rate goes straight from each point to the next (two points at one
// time are a step); the attack ends at the last point.
type shapedPacer []ratePoint

var _ vegeta.Pacer = shapedPacer(nil)

func (p shapedPacer) total() time.Duration { return p[len(p)-1].at }

func (p shapedPacer) Rate(elapsed time.Duration) float64 {
	for i := 1; i < len(p); i++ {
		a, b := p[i-1], p[i]
		if elapsed < b.at {
			if b.at == a.at {
				return b.rate
			}
			f := float64(elapsed-a.at) / float64(b.at-a.at)
			return a.rate + f*(b.rate-a.rate)
		}
	}
	return p[len(p)-1].rate
}

// hitsAt is the requests due from the start to elapsed: the area under
// the rate.
func (p shapedPacer) hitsAt(elapsed time.Duration) float64 {
	sum := 0.0
	for i := 1; i < len(p); i++ {
		a, b := p[i-1], p[i]
		if elapsed <= a.at {
			break
		}
		end := min(elapsed, b.at)
		atEnd := b.rate
		if end < b.at {
			atEnd = a.rate + float64(end-a.at)/float64(b.at-a.at)*(b.rate-a.rate)
		}
		sum += (end - a.at).Seconds() * (a.rate + atEnd) / 2
	}
	return sum
}

func (p shapedPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if elapsed >= p.total() {
		return 0, true
	}
	due := p.hitsAt(elapsed)
	if float64(hits) < due {
		return 0, false
	}
	r := max(p.Rate(elapsed), 0.1)
	return time.Duration((float64(hits) + 1 - due) / r * float64(time.Second)), false
}

// shapeOf is the anonymous visitors' pacer of shape at the peak rate
// rate, and the times its charts mark (the peak's starts and ends).
func shapeOf(shape string, k surgeKnobs, rate int) (shapedPacer, []time.Duration) {
	q, r, d := float64(k.quietRate), float64(rate), k.surge
	switch shape {
	case shapeRamp:
		return shapedPacer{{0, q}, {k.quiet, q}, {k.quiet + 2*d, r}, {k.quiet + 5*d, q}},
			[]time.Duration{k.quiet, k.quiet + 2*d}
	case shapeBursts:
		p := shapedPacer{{0, q}}
		var marks []time.Duration
		for i := range 3 {
			at := k.quiet + time.Duration(2*i)*d
			p = append(p, ratePoint{at, q}, ratePoint{at, r}, ratePoint{at + d, r}, ratePoint{at + d, q})
			marks = append(marks, at, at+d)
		}
		last := p[len(p)-1].at
		return append(p, ratePoint{last + k.quiet, q}), marks
	}
	return shapedPacer{{0, q}, {k.quiet, q}, {k.quiet, r}, {k.quiet + d, r}}, []time.Duration{k.quiet, k.quiet + d}
}

// shapeRun is a shaped surge's record.
type shapeRun struct {
	*surgeRun
	shape string
	marks []time.Duration
}

// shapeSurge runs SHAPE's surge with the daemon in auto and the default
// config on a fresh cache, logged-in users all along, and writes its
// section and chart.
func (st *surgeStack) shapeSurge(b *testing.B, k surgeKnobs) {
	b.Helper()
	rep := &surgeReport{knobs: k, loadBefore: surgeLoadavg(), cpus: runtime.NumCPU(), started: time.Now(), subscribers: len(surgeUsers), posts: len(st.wp.Posts)}
	rep.capacity = st.capacity(b, k.capacityFor)
	rep.rate = max(1, int(rep.capacity*k.factor+0.5))
	// The daemon reads its Varnish's traffic, as the default config does
	// from the host's one instance: the way down waits for it to fall.
	st.edit = func(cfg *config.Config) { cfg.Varnish.Targets[0].Name = st.v.WorkDir }
	defer func() { st.edit = nil }()
	rep.settled = st.settle(b, k.settle)
	pacer, marks := shapeOf(k.shape, k, rep.rate)
	st.fresh(b, "")
	b.Logf("surge: %s to %d req/s over %s; load average %.2f", k.shape, rep.rate, pacer.total(), surgeLoadavg())
	r := &shapeRun{surgeRun: &surgeRun{name: k.shape, surgeAt: marks[0], surgeEnd: marks[len(marks)-1], loadStart: surgeLoadavg(), settled: rep.settled},
		shape: k.shape, marks: marks}
	l := newLoad(st.mix, nil)
	r.mon = st.watch(b, l.start)
	l.attack(l.attacker(32, 0), st.mix.anonymous(), pacer, pacer.total(), false)
	l.attack(l.attacker(32, 0), st.mix.users(st.cookies), vegeta.ConstantPacer{Freq: len(st.cookies), Per: time.Second}, pacer.total(), true)
	r.hits = l.wait()
	l.tr.CloseIdleConnections()
	r.mon.stop()
	st.drain()
	rep.maxConnections = st.maxConnections
	rep.elapsed = time.Since(rep.started)
	s := r.shapeSummary()
	b.Logf("surge: %s: anonymous %.1f %% ok, logged-in %.1f %% ok, %d climbs, gears %s", k.shape, s.anonOK*100, s.userOK*100, s.climbs, s.path)
	r.write(b, rep, k.out)
	b.ReportMetric(s.anonOK*100, k.shape+"-anon-ok-%")
	b.ReportMetric(s.userOK*100, k.shape+"-user-ok-%")
	b.ReportMetric(float64(s.climbs), k.shape+"-climbs")
	b.ReportMetric(0, "ns/op")
}

// shapeSummary is what the report says of a shaped run.
type shapeSummary struct {
	anonOK, userOK float64
	anonN, userN   int
	climbs         int    // times the gear left light
	path           string // the gears in the order they came: light → heavy → …
	failedAfter    int    // bursts: requests not served from the second burst on
	afterN         int
	toHeavy        []string // from each peak's start (bursts) or the ramp's
}

func (r *shapeRun) shapeSummary() shapeSummary {
	var s shapeSummary
	all := r.between(0, 1<<62)
	s.anonOK, s.anonN = okRatio(all, false)
	s.userOK, s.userN = okRatio(all, true)
	var path []string
	for _, g := range r.mon.gears {
		if len(path) == 0 || path[len(path)-1] != g.gear {
			if g.gear != state.Light.String() && (len(path) == 0 || path[len(path)-1] == state.Light.String()) {
				s.climbs++
			}
			path = append(path, g.gear)
		}
	}
	s.path = strings.Join(path, " → ")
	if r.shape == shapeBursts && len(r.marks) >= 3 {
		for _, h := range r.between(r.marks[2], 1<<62) {
			s.afterN++
			if !h.ok() {
				s.failedAfter++
			}
		}
	}
	for i := 0; i < len(r.marks); i += 2 {
		from, to := r.marks[i], time.Duration(1<<62)
		if i+2 < len(r.marks) {
			to = r.marks[i+2]
		}
		heavy := "never"
		if g := r.mon.gearAt(from); g == state.Heavy.String() {
			heavy = "heavy before"
		} else {
			for _, x := range r.mon.gears {
				if x.at >= from && x.at < to && x.gear == state.Heavy.String() {
					heavy = fmt.Sprintf("%.1f s", (x.at - from).Seconds())
					break
				}
			}
		}
		s.toHeavy = append(s.toHeavy, heavy)
	}
	return s
}

// shapeHeading is the section's heading of a shape.
func shapeHeading(shape string) string {
	if shape == shapeRamp {
		return "## A ramp on WordPress: quiet to 10× and back over minutes (0.5)"
	}
	return "## Bursts on WordPress: three at 10×, a quiet minute between (0.5)"
}

func (r *shapeRun) write(tb testing.TB, rep *surgeReport, out string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		tb.Fatal(err)
	}
	chart := strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
	rates, p99 := r.panels(rep)
	rates.Title.Text = fmt.Sprintf("%s: the daemon in auto, default config; dashed: the peak's starts and ends", r.shape)
	for _, p := range []*plot.Plot{rates, p99} {
		addMarks(p, r.marks, p.Y.Max)
	}
	writePanels(tb, chart, [][]*plot.Plot{{rates}, {p99}}, vg.Length(300), 2)
	link := os.Getenv("SURGE_CHART_LINK")
	if link == "" {
		link = filepath.Base(chart)
	}
	k := rep.knobs
	s := r.shapeSummary()
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("%s", shapeHeading(r.shape))
	p("")
	p("Measured %s with `make bench-surge SHAPE=%s` (`BenchmarkSurge`, tests/system) at commit %s: %d CPUs, %s; %s, %s.",
		rep.started.UTC().Format("2006-01-02 15:04 UTC"), r.shape, commit(tb), rep.cpus, cpuModel(), version("varnishd", "-V"), version("apache2", "-v"))
	p("Load average before the run: %.2f, at its start %.2f (the machine is shared: others' work counts). The run took %s.", rep.loadBefore, r.settled, rep.elapsed.Round(time.Second))
	p("")
	p("The stack, the click mix and the logged-in users of [the open-loop surge](#an-open-loop-surge-on-wordpress-04) (Apache alone serves **%.1f req/s**; `backend.max_connections: %d`), the daemon in auto with the default config reading its Varnish's traffic, on a fresh cache.", rep.capacity, rep.maxConnections)
	if r.shape == shapeRamp {
		p("The anonymous rate: %s at %d req/s, then a straight climb to **%d req/s (%.4g× capacity) over %s**, then a straight decay back to %d req/s over %s.",
			k.quiet, k.quietRate, rep.rate, k.factor, 2*k.surge, k.quietRate, 3*k.surge)
	} else {
		p("The anonymous rate: %s at %d req/s, then **three bursts of %d req/s (%.4g× capacity) for %s**, %s at %d req/s between them and after.",
			k.quiet, k.quietRate, rep.rate, k.factor, k.surge, k.surge, k.quietRate)
	}
	p("")
	p("| figure | measured | goal |")
	p("|---|---:|---|")
	p("| anonymous requests served | %s of %d | |", pct(s.anonOK), s.anonN)
	if r.shape == shapeRamp {
		p("| logged-in requests served | %s of %d | 100 %% |", pct(s.userOK), s.userN)
		p("| climbs from light (gears in order) | %d (%s) | one climb |", s.climbs, s.path)
		p("| heavy after the climb's start | %s | |", s.toHeavy[0])
	} else {
		p("| logged-in requests served | %s of %d | |", pct(s.userOK), s.userN)
		p("| climbs from light (gears in order) | %d (%s) | one climb |", s.climbs, s.path)
		p("| requests not served from the second burst on | %d of %d | 0 |", s.failedAfter, s.afterN)
		p("| heavy after each burst's start | %s | |", strings.Join(s.toHeavy, ", "))
	}
	p("")
	goals := fmt.Sprintf("one climb %s", goal(s.climbs == 1))
	if r.shape == shapeRamp {
		goals += fmt.Sprintf("; logged-in 100 %% %s", goal(s.userN > 0 && s.userOK >= 1))
	} else {
		goals += fmt.Sprintf("; nothing failed after the first burst %s", goal(s.failedAfter == 0))
	}
	p("Goals: %s.", goals)
	p("")
	p("![%s](%s)", strings.TrimPrefix(shapeHeading(r.shape), "## "), link)
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("surge: report in %s, chart in %s", out, chart)
}

// TestShapedPacer: each shape's pacer sends the requests its rate's area
// says, at the rates of its points, and stops at its end.
func TestShapedPacer(t *testing.T) {
	k := surgeKnobs{quiet: 20 * time.Second, surge: time.Minute, quietRate: 2}
	const peak = 500
	for _, c := range []struct {
		shape string
		want  float64 // requests from start to end
		peaks int     // marks: a start and an end per peak
	}{
		{shapeStep, 2*20 + peak*60, 1},
		{shapeRamp, 2*20 + (2+peak)/2.0*120 + (peak+2)/2.0*180, 1},
		{shapeBursts, 2*20 + 3*peak*60 + 2*2*60 + 2*20, 3},
	} {
		p, marks := shapeOf(c.shape, k, peak)
		if got := p.hitsAt(p.total()); got < c.want-0.5 || got > c.want+0.5 {
			t.Errorf("%s: %.1f requests due, want %.1f", c.shape, got, c.want)
		}
		top := 0.0
		for _, m := range marks {
			top = max(top, p.Rate(m))
		}
		if len(marks) != 2*c.peaks || top != peak || p.Rate(marks[0]-time.Millisecond) > 2.01 {
			t.Errorf("%s: marks %v, the highest rate at them %.1f, just before the first %.1f", c.shape, marks, top, p.Rate(marks[0]-time.Millisecond))
		}
		// Vegeta's loop: send when told to wait 0, else wait that long.
		var hits uint64
		for at := time.Duration(0); ; {
			wait, stop := p.Pace(at, hits)
			if stop {
				break
			}
			if wait == 0 {
				hits++
				continue
			}
			at += wait
		}
		if d := float64(hits) - c.want; d < -2 || d > 2 {
			t.Errorf("%s: paced %d requests, want %.0f", c.shape, hits, c.want)
		}
	}
}

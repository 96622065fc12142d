package system

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gearshift/gearshift/controller/state"
)

// sitesReport is BenchmarkSites's result, written as a markdown section
// (a "## " heading, so make bench-sites can replace it in BENCHMARKS.md)
// and a chart beside it.
type sitesReport struct {
	knobs          surgeKnobs
	started        time.Time
	elapsed        time.Duration
	cpus           int
	loadBefore     float64
	settled        float64 // load average before the first surge run
	capacity       float64 // C of the surging site: 200s per second from Apache alone
	rate           int     // the surge's anonymous req/s
	maxConnections int
	quiet          *sitesRun   // the neighbours alone
	runs           []*sitesRun // single, sites
}

// sitesSummary is what the report says of one run.
type sitesSummary struct {
	shop                         runSummary // the surging site's figures, as bench-surge gives them
	neighbourOK, neighbourUserOK float64    // 200s within the timeout, during the surge
	neighbourN                   int
	neighbourP99                 time.Duration // of the time to a good answer, during the surge
	neighbourLight               float64       // share of the surge's gear samples with every neighbour light
	neighbourMax                 string        // the heaviest gear a neighbour was served in
	shopHeavy                    string        // the surging site's time to heavy
}

// neighbourHits are the neighbours' hits sent between from and to.
func (r *sitesRun) neighbourHits(from, to time.Duration) []hit {
	var out []hit
	for _, hits := range r.neighbours {
		for _, h := range hits {
			if h.at >= from && h.at < to {
				out = append(out, h)
			}
		}
	}
	return out
}

func goodTimes(hits []hit) []time.Duration {
	out := make([]time.Duration, 0, len(hits))
	for _, h := range hits {
		out = append(out, h.good())
	}
	return out
}

func (r *sitesRun) summary() sitesSummary {
	var s sitesSummary
	s.shop = r.shop.summary()
	during := r.neighbourHits(r.shop.surgeAt, r.shop.surgeEnd)
	ok := 0
	for _, h := range during {
		if h.ok() {
			ok++
		}
	}
	s.neighbourOK, s.neighbourN = ratio(ok, len(during)), len(during)
	s.neighbourUserOK, _ = okRatio(during, true)
	s.neighbourP99 = quantile(goodTimes(during), 0.99)

	light, samples := 0, 0
	s.neighbourMax, s.shopHeavy = state.Light.String(), "never"
	for _, g := range r.gears {
		if g.gears[shopHost] == state.Heavy.String() && s.shopHeavy == "never" && g.at >= r.shop.surgeAt {
			s.shopHeavy = fmt.Sprintf("%.1f s", (g.at - r.shop.surgeAt).Seconds())
		}
		if g.at < r.shop.surgeAt || g.at >= r.shop.surgeEnd {
			continue
		}
		samples++
		all := true
		for _, h := range sitesBenchHosts[1:] {
			gear := g.gears[h]
			all = all && gear == state.Light.String()
			if heavier(gear, s.neighbourMax) {
				s.neighbourMax = gear
			}
		}
		if all {
			light++
		}
	}
	s.neighbourLight = ratio(light, samples)
	return s
}

// heavier tells whether gear a is above gear b.
func heavier(a, b string) bool {
	ga, errA := state.Parse(a)
	gb, errB := state.Parse(b)
	return errA == nil && errB == nil && ga > gb
}

// quietP99 is the neighbours' p99 with no surge.
func (rep *sitesReport) quietP99() time.Duration {
	return quantile(goodTimes(rep.quiet.neighbourHits(0, 1<<62)), 0.99)
}

const sitesHeading = "## One site's surge among neighbours (0.5)"

func (rep *sitesReport) write(tb testing.TB, out string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		tb.Fatal(err)
	}
	chart := strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
	rep.chart(tb, chart)
	link := os.Getenv("SITES_CHART_LINK")
	if link == "" {
		link = filepath.Base(chart)
	}
	k := rep.knobs
	quiet := rep.quietP99()
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("%s", sitesHeading)
	p("")
	p("Measured %s with `make bench-sites` (`BenchmarkSites`, tests/system) at commit %s: %d CPUs, %s; %s, %s.",
		rep.started.UTC().Format("2006-01-02 15:04 UTC"), commit(tb), rep.cpus, cpuModel(), version("varnishd", "-V"), version("apache2", "-v"))
	p("Load average before the run: %.2f, before the first surge %.2f (the machine is shared: others' work counts). The run took %s.", rep.loadBefore, rep.settled, rep.elapsed.Round(time.Second))
	p("")
	p("Debian's WordPress serving three sites, `%s`, `%s` and `%s`, as name-based virtual hosts of one Apache (prefork, %d workers, mod_php) with one MariaDB, behind one varnishd with Debian's varnish-modules, all on loopback; each site has %d posts and %d subscribers.",
		shopHost, blogHost, newsHost, apacheWorkers, surgePosts, len(surgeUsers))
	p("Each run has a fresh cache and a fresh `gearshift run` in auto with the default config (its target with the instance's name, backend, files and `backend.max_connections: %d`): **single** has no `sites` key (0.4's one gear for the server); **sites** has one entry per host (`max_connections` defaults to half the backend's).", rep.maxConnections)
	p("Load, open loop (vegeta, a constant arrival rate): on `%s`, %s of %d req/s, then **%d req/s (%.4g× its capacity of %.1f req/s, Apache alone) for %s**, with bench-surge's click mix (%.0f %% unique `?fbclid=`, %.0f %% `utm_*`) and %d logged-in users at 1 request/s each; on each neighbour, all along, %d anonymous req/s of the same mix and %d logged-in users at 1 request/s each.",
		shopHost, k.quiet, k.quietRate, rep.rate, k.factor, rep.capacity, k.surge, surgeFbclid*100, surgeUTM*100, len(surgeUsers), neighbourRate, neighbourUsers)
	p("A request succeeds with a 200 within %s; latencies are the time to a 200, a failure counting as the timeout. The neighbours' quiet p99 (their traffic alone, %s, the sites config): **%s s**.",
		surgeTimeout, k.quiet+10*time.Second, secs(quiet))
	p("")
	sums := make([]sitesSummary, len(rep.runs))
	for i, r := range rep.runs {
		sums[i] = r.summary()
	}
	row := func(name, goal string, cell func(s sitesSummary) string) {
		cells := make([]string, len(sums))
		for i, s := range sums {
			cells[i] = cell(s)
		}
		p("| %s | %s | %s |", name, strings.Join(cells, " | "), goal)
	}
	p("| during the surge | single (0.4) | sites | goal |")
	p("|---|---:|---:|---|")
	row("neighbours: requests served", "≥ 99.9 %", func(s sitesSummary) string { return fmt.Sprintf("%s of %d", pct(s.neighbourOK), s.neighbourN) })
	row("neighbours: logged-in requests served", "100 %", func(s sitesSummary) string { return pct(s.neighbourUserOK) })
	row("neighbours: p99 s (× quiet)", "≤ 1.5×", func(s sitesSummary) string {
		return fmt.Sprintf("%s (%.1f×)", secs(s.neighbourP99), s.neighbourP99.Seconds()/max(quiet.Seconds(), 1e-3))
	})
	row("neighbours: time in light", "100 %", func(s sitesSummary) string { return pct(s.neighbourLight) })
	row("neighbours: heaviest gear", "light", func(s sitesSummary) string { return s.neighbourMax })
	row("surging site: anonymous served", "≥ 99.9 %", func(s sitesSummary) string { return pct(s.shop.anonOK) })
	row("surging site: logged-in served", "", func(s sitesSummary) string { return pct(s.shop.userOK) })
	row("surging site: heavy after", "", func(s sitesSummary) string { return s.shopHeavy })
	row("surging site: time to protect", "", func(s sitesSummary) string { return s.shop.protect })
	row("backend requests (Apache's log)", "", func(s sitesSummary) string { return fmt.Sprint(s.shop.backend) })
	p("")
	s := sums[len(sums)-1]
	p("Goals, with sites: neighbours served %s; their logged-in users %s; their p99 %s; neighbours in light %s; the surging site %s.",
		goal(s.neighbourOK >= 0.999), goal(s.neighbourUserOK >= 1), goal(s.neighbourP99.Seconds() <= 1.5*quiet.Seconds()),
		goal(s.neighbourLight >= 1 && s.neighbourMax == state.Light.String()), goal(s.shop.anonOK >= 0.999))
	p("")
	p("![One site's surge, single gear and sites](%s)", link)
	p("")
	p("Each run: the surging site's requests per second (offered, 200s, Apache's whole log) over the neighbours' per-second p99, the band above it the heaviest gear a neighbour was served in (for single, the server's).")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("sites: report in %s, chart in %s", out, chart)
}

// chart draws, per run, the surging site's requests over the neighbours'
// p99 with their gear as a band.
func (rep *sitesReport) chart(tb testing.TB, file string) {
	tb.Helper()
	var rows [][]*plot.Plot
	for _, r := range rep.runs {
		rates, _ := r.shop.panels(&surgeReport{knobs: rep.knobs})
		rates.Title.Text = fmt.Sprintf("%s: %s surging", r.name, shopHost)
		rows = append(rows, []*plot.Plot{rates}, []*plot.Plot{r.neighbourPanel()})
	}
	writePanels(tb, file, rows, vg.Length(230*len(rep.runs)), 2)
}

func (r *sitesRun) neighbourPanel() *plot.Plot {
	var end time.Duration
	for _, hits := range r.neighbours {
		for _, h := range hits {
			end = max(end, h.at)
		}
	}
	n := int(end/time.Second) + 1
	per := make([][]time.Duration, n)
	for _, h := range r.neighbourHits(0, 1<<62) {
		i := int(h.at / time.Second)
		per[i] = append(per[i], h.good())
	}
	lat := make(plotter.XYs, n)
	for i := range per {
		lat[i] = plotter.XY{X: float64(i) + 0.5, Y: quantile(per[i], 0.99).Seconds()}
	}
	const band = 5.4 // above the 5 s timeout
	p := surgePlot("", "neighbours' p99 s", float64(n))
	p.X.Label.Text = "seconds from the run's start"
	p.Y.Min, p.Y.Max = 0, 6
	for i := range n {
		gear := state.Light.String()
		for _, g := range r.gears {
			if g.at >= time.Duration(i)*time.Second && g.at < time.Duration(i+1)*time.Second {
				for _, h := range sitesBenchHosts[1:] {
					if heavier(g.gears[h], gear) {
						gear = g.gears[h]
					}
				}
			}
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: float64(i), Y: band}, {X: float64(i + 1), Y: band}, {X: float64(i + 1), Y: 6}, {X: float64(i), Y: 6}})
		if err == nil {
			poly.Color, poly.LineStyle.Width = surgeGearColors[gear], 0
			p.Add(poly)
		}
	}
	addLine(p, lat, surgeP99, "neighbours' p99 (their gear band above)")
	addMarks(p, []time.Duration{r.shop.surgeAt, r.shop.surgeEnd}, band)
	return p
}

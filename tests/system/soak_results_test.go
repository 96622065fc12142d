//go:build soak

package system

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// shift is one gear change the daemon logged.
type shift struct {
	at   time.Time
	to   string
	seen bool
	away bool          // Varnish was away until the next shift: not judged
	late time.Duration // from reachable (with profiles) to seen
}

// shifts reads the daemon's log for its gear changes.
func (s *soak) shifts(t *testing.T) []shift {
	f, err := os.Open(s.cfg.Log.File)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []shift
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		e, ok := logging.ParseEntry(sc.Bytes())
		if !ok || e.Str("msg") != logging.MsgStateChange {
			continue
		}
		at, ok := e.Time()
		if !ok || at.Before(s.start) || at.After(s.watchEnd.Add(-time.Second)) {
			continue
		}
		out = append(out, shift{at: at, to: e.Str(logging.FieldTo)})
	}
	return out
}

// judge marks each shift seen when Varnish ran its gear within 2 polls
// (and the watcher's period) of Varnish being reachable with gearshift's
// profiles loaded after it: at once, normally; after a varnishd restart,
// once the profiles are compiled again; after a cache child was killed,
// once it serves again (its manager answers vcl.list all along, but no
// vcl.use takes until the new child runs). A shift the next one overtook
// while Varnish was away (restarting) is not judged: there was nothing to
// reach.
func (s *soak) judge(shifts []shift) (worst time.Duration) {
	slack := 2*soakPoll + 2*soakWatchIv
	w := s.watch
	j := 0
	for i := range shifts {
		sh := &shifts[i]
		from := sh.at.Add(-500 * time.Millisecond)
		if i > 0 && shifts[i-1].at.After(from) {
			from = shifts[i-1].at
		}
		for j > 0 && w[j-1].at.After(from) {
			j--
		}
		for j < len(w) && w[j].at.Before(from) {
			j++
		}
		var ready time.Time
		for k := j; k < len(w); k++ {
			if i+1 < len(shifts) && w[k].at.After(shifts[i+1].at) && ready.IsZero() {
				// Varnish was away (restarting) until the next shift
				// came: there was nothing to reach.
				sh.away = true
				break
			}
			if ready.IsZero() && w[k].ok && w[k].ours >= 3 && !w[k].at.Before(s.childBack(sh.at)) {
				ready = w[k].at
			}
			if w[k].ok && w[k].active == sh.to {
				sh.seen = true
				if !ready.IsZero() {
					sh.late = w[k].at.Sub(ready)
				}
				break
			}
			if !ready.IsZero() && w[k].at.After(ready.Add(slack)) {
				break
			}
		}
		worst = max(worst, sh.late)
	}
	return worst
}

// childBack is at, or when the cache child killed at or before it
// served again.
func (s *soak) childBack(at time.Time) time.Time {
	for _, w := range s.windows {
		if w.name == "child" && !at.Before(w.from) && at.Before(w.till) {
			return w.till
		}
	}
	return at
}

// results checks the run and writes its CSV, chart and summary.
func (s *soak) results(t *testing.T, out string, length time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	shifts := s.shifts(t)
	worst := s.judge(shifts)
	missed, away := 0, 0
	for _, sh := range shifts {
		if sh.away {
			away++
			continue
		}
		if !sh.seen {
			missed++
			if missed <= 5 {
				t.Errorf("the shift to %s at %s was not seen in Varnish within 2 polls of it being reachable; vcl.list around it:\n%s",
					sh.to, sh.at.Sub(s.start).Round(time.Millisecond), s.watchAround(sh.at))
			}
		}
	}
	if len(shifts) < int(length/soakStep)/2 {
		t.Errorf("%d shifts in %s, want about one each %s", len(shifts), length, soakStep)
	}

	// The daemon ran throughout: same process, uptime never back.
	var up int64 = -1
	for _, sm := range s.samples {
		if sm.uptime >= 0 && sm.uptime < up {
			t.Errorf("the daemon's uptime went from %d s to %d s: it restarted", up, sm.uptime)
		}
		up = max(up, sm.uptime)
	}
	if !s.d.running() {
		t.Errorf("the daemon is not running at the end (%v)", s.d.exitErr)
	}

	// Nothing grows.
	if len(s.samples) < 2*minJudged {
		t.Fatalf("%d samples in %s, want one every %s", len(s.samples), length, soakSampleIv)
	}
	half := s.samples[len(s.samples)/2:]
	hours := half[len(half)-1].at.Sub(half[0].at).Hours()
	growth := func(name string, get func(soakSample) float64, rate, floor float64) float64 {
		g, err := growthOf(half, get)
		if err != nil {
			t.Errorf("%s over the second half: %v", name, err)
			return 0
		}
		if bound := max(rate*hours, floor); g > bound {
			t.Errorf("%s grew %.1f over the second half (a least-squares line), bound %.1f", name, g, bound)
		}
		return g
	}
	rssG := growth("RSS (bytes)", func(x soakSample) float64 { return x.rss }, rssRate, rssFloor)
	gorG := growth("goroutines", func(x soakSample) float64 { return x.gor }, gorRate, gorFloor)
	fdG := growth("open fds", func(x soakSample) float64 { return x.fds }, fdRate, fdFloor)

	maxVCLs, maxBansSeen := 0, 0.0
	for _, w := range s.watch {
		maxVCLs = max(maxVCLs, w.loaded)
	}
	for _, sm := range s.samples {
		maxBansSeen = max(maxBansSeen, sm.bans)
	}
	if maxVCLs > maxLoadedVCLs {
		t.Errorf("Varnish held %d VCLs at once, bound %d (two configs' profiles, the boot VCL, discarded ones cooling)", maxVCLs, maxLoadedVCLs)
	}
	endVCLs := -1
	for _, w := range s.watch {
		if w.ok {
			endVCLs = w.loaded
		}
	}
	if endVCLs > endLoadedVCLs {
		t.Errorf("Varnish holds %d VCLs at the end, want %d at most (the profiles and the boot VCL)", endVCLs, endLoadedVCLs)
	}
	var heavy []time.Time
	for _, sh := range shifts {
		if sh.to == "heavy" {
			heavy = append(heavy, sh.at)
		}
	}
	life := time.Duration(s.cfg.Profiles.StaticTTL + s.cfg.Profiles.HeavyGrace + s.cfg.Profiles.StaleIfError)
	if err := judgeBans(s.samples, heavy, life); err != nil {
		t.Error(err)
	}

	// The history: within max_bytes but for today's files (kept whole by
	// design), and every transition outside a full disk recorded.
	files, err := history.List(s.cfg.History.Dir)
	if err != nil {
		t.Fatal(err)
	}
	today := time.Now().Format("2006-01-02")
	var past, total int64
	for _, f := range files {
		total += f.Size
		if f.Day < today {
			past += f.Size
		}
	}
	if past > soakMaxBytes {
		t.Errorf("the history's past days take %d bytes, max_bytes %d", past, soakMaxBytes)
	}
	signals, err := s.cfg.Signals()
	if err != nil {
		t.Fatal(err)
	}
	src, err := history.Open(s.cfg.History.Dir, signals, s.start, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := history.Collect(src)
	if err != nil {
		t.Fatal(err)
	}
	lost, excused := 0, 0
	k := 0
	for _, sh := range shifts {
		if s.during("disk", sh.at, 2*time.Second) {
			excused++
			continue
		}
		for k < len(recs) && recs[k].Time.Before(sh.at.Add(-time.Second)) {
			k++
		}
		found := false
		for m := k; m < len(recs) && recs[m].Time.Before(sh.at.Add(time.Second)); m++ {
			if recs[m].Recorded != nil && recs[m].Recorded.Gear.String() == sh.to {
				found = true
				break
			}
		}
		if !found {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d transitions (outside a full disk) are missing from the history", lost, len(shifts)-excused)
	}
	if n := s.traffic.drops.Load(); n > 0 {
		t.Errorf("alice lost her session %d times", n)
	}
	if err := judgeVisitors(lampstack.AccessLog(s.site.Dir)); err != nil {
		t.Error(err)
	}
	if s.traffic.writes.Load() == 0 || s.traffic.pages.Load() == 0 {
		t.Errorf("no traffic got through: %d pages, %d writes", s.traffic.pages.Load(), s.traffic.writes.Load())
	}

	s.writeCSV(t, filepath.Join(out, "soak.csv"), shifts)
	s.chart(t, filepath.Join(out, "soak.png"), shifts)
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	reloads := s.counts["good reload"]*1 + s.counts["bad reload"]*2 + s.counts["SIGHUP storm"]*50
	summary := fmt.Sprintf(`soak of %s (poll_interval %s, a step every %s)
shifts commanded %d, seen in Varnish %d, missed %d, overtaken while Varnish restarted %d; slowest after Varnish was reachable with its profiles %s
reload requests %d (good %d, bad %d and the good one after each, SIGHUP storms %d of 50); varnishd restarts %d, cache child kills %d; disk full %d, prometheus down %d, hook hanging %d
transitions in the history %d, missing %d, during a full disk (not judged) %d; history %s at the end (max_bytes %s, today's file kept whole)
traffic: %d pages, %d signed-in writes, %d sign-ins, %d errors (varnishd restarting), %d lost sessions
RSS %.1f → %.1f MiB (second half %+.2f MiB), goroutines %.0f → %.0f (%+.1f), fds %.0f → %.0f (%+.1f)
loaded VCLs at most %d, at the end %d; MAIN.bans at most %.0f
Varnish's ban counters at the end: %s
`, length, soakPoll, soakStep,
		len(shifts), len(shifts)-missed-away, missed, away, worst.Round(time.Millisecond),
		reloads, s.counts["good reload"], s.counts["bad reload"], s.counts["SIGHUP storm"], s.counts["varnishd restarted"], s.counts["cache child killed"],
		s.counts["history disk full"], s.counts["prometheus down"], s.counts["hook hangs"],
		len(shifts)-excused-lost, lost, excused, fmtBytes(total), fmtBytes(soakMaxBytes),
		s.traffic.pages.Load(), s.traffic.writes.Load(), s.traffic.logins.Load(), s.traffic.errors.Load(), s.traffic.drops.Load(),
		first.rss/(1<<20), last.rss/(1<<20), rssG/(1<<20), first.gor, last.gor, gorG, first.fds, last.fds, fdG,
		maxVCLs, endVCLs, maxBansSeen, s.banStats())
	t.Log("\n" + summary)
	os.WriteFile(filepath.Join(out, "soak.txt"), []byte(summary), 0o644)
}

// watchAround prints the watcher's reads from 1 s before at to 3 s after.
func (s *soak) watchAround(at time.Time) string {
	var b strings.Builder
	for _, w := range s.watch {
		if w.at.Before(at.Add(-time.Second)) || w.at.After(at.Add(3*time.Second)) {
			continue
		}
		fmt.Fprintf(&b, "  %+7.3fs ok=%v active=%q loaded=%d ours=%d\n", w.at.Sub(at).Seconds(), w.ok, w.active, w.loaded, w.ours)
	}
	return b.String()
}

// during tells whether at is within margin of a window of the fault name.
func (s *soak) during(name string, at time.Time, margin time.Duration) bool {
	for _, w := range s.windows {
		if w.name == name && at.After(w.from.Add(-margin)) && at.Before(w.till.Add(margin)) {
			return true
		}
	}
	return false
}

// banStats are Varnish's ban counters, as varnishstat prints them.
func (s *soak) banStats() string {
	out, err := exec.Command("varnishstat", "-n", s.v.WorkDir, "-1", "-f", "MAIN.bans*").Output()
	if err != nil {
		return err.Error()
	}
	var fs []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			fs = append(fs, strings.TrimPrefix(f[0], "MAIN.")+" "+f[1])
		}
	}
	return strings.Join(fs, ", ")
}

func fmtBytes(n int64) string {
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

// minJudged is the fewest samples with a value that a growth or a bound
// is judged on: with fewer, a reader that failed every time (or a run
// too short to sample) would pass as "nothing grew".
const minJudged = 3

// judged tells whether n samples with a value out of all are enough to
// judge on: at least minJudged, and at least half of them.
func judged(n, all int) error {
	if n < minJudged || 2*n < all {
		return fmt.Errorf("%d of %d samples read, want at least %d and half", n, all, minJudged)
	}
	return nil
}

// growthOf is how much get grew over xs: the least-squares slope times
// the samples' span. Samples without a value (-1) are left out; too few
// with one is an error, not a growth of 0.
func growthOf(xs []soakSample, get func(soakSample) float64) (float64, error) {
	if len(xs) == 0 {
		return 0, judged(0, 0)
	}
	per, n := slope(xs, get)
	if err := judged(n, len(xs)); err != nil {
		return 0, err
	}
	return per * xs[len(xs)-1].at.Sub(xs[0].at).Hours(), nil
}

// slope is the least-squares slope of get over the samples, per hour,
// and the samples it was drawn through; samples without a value (-1)
// are left out.
func slope(xs []soakSample, get func(soakSample) float64) (float64, int) {
	var n, sx, sy, sxx, sxy float64
	t0 := xs[0].at
	for _, x := range xs {
		y := get(x)
		if y < 0 {
			continue
		}
		h := x.at.Sub(t0).Hours()
		n++
		sx += h
		sy += y
		sxx += h * h
		sxy += h * y
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return 0, int(n)
	}
	return (n*sxy - sx*sy) / d, int(n)
}

// judgeBans holds Varnish's ban list to the bans the soak caused: the
// daemon bans the guest copies at each shift to heavy (heavy holds their
// times), and nothing else the soak does bans (a signed-in write drops
// its session's pages with xkey). A ban stays on the list until no object
// older than it is left, at most life (a static file's TTL, heavy's grace
// and stale_if_error's keep), so each sample may hold maxBans and the
// heavy shifts of the life before it. The bound follows the run's own
// shifts, not its length: a ban at each write (14,000 in 2 hours, 360 in
// 3 minutes) or at each shift passes it at any length. Too few samples
// read is an error too.
func judgeBans(samples []soakSample, heavy []time.Time, life time.Duration) error {
	read := 0
	for _, sm := range samples {
		if sm.bans < 0 {
			continue
		}
		read++
		caused := 0
		for _, at := range heavy {
			if !at.After(sm.at) && sm.at.Sub(at) <= life {
				caused++
			}
		}
		if bound := float64(maxBans + caused); sm.bans > bound {
			return fmt.Errorf("MAIN.bans %.0f at %s, bound %.0f (%d and the %d shifts to heavy of the %s before)",
				sm.bans, sm.at.Format(time.TimeOnly), bound, maxBans, caused, life)
		}
	}
	if err := judged(read, len(samples)); err != nil {
		return fmt.Errorf("MAIN.bans: %w", err)
	}
	return nil
}

// judgeVisitors: the soak's load comes as the visitors it plays, each
// with an X-Forwarded-For of its own from 127.0.0.1 (a trusted proxy, as
// a terminator on the host), so Varnish forwards each as itself (status
// front_door: forwarded) and Apache's access log (%a, through
// mod_remoteip) names the visitors: the anonymous crowd's documentation
// addresses and alice's, not 127.0.0.1 (a request Varnish took for a
// local tool's) for most of it.
func judgeVisitors(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	crowd, alice, loopback := 0, 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		a, _, _ := strings.Cut(sc.Text(), " ")
		switch {
		case a == userAddr(0):
			alice++
		case strings.HasPrefix(a, "198.51.100.") || strings.HasPrefix(a, "192.0.2."):
			crowd++
		case a == "127.0.0.1" || a == "::1":
			loopback++
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if crowd == 0 || alice == 0 || loopback >= crowd+alice {
		return fmt.Errorf("Apache logged %d requests of the crowd, %d of alice, %d of 127.0.0.1: the soak's visitors are to come as themselves (X-Forwarded-For)",
			crowd, alice, loopback)
	}
	return nil
}

// seenBy counts the shifts before at, and those of them seen in Varnish.
func seenBy(shifts []shift, at time.Time) (commanded, seen int) {
	for _, sh := range shifts {
		if sh.at.After(at) {
			break
		}
		commanded++
		if sh.seen {
			seen++
		}
	}
	return commanded, seen
}

func (s *soak) writeCSV(t *testing.T, file string, shifts []shift) {
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := csv.NewWriter(f)
	w.Write([]string{"seconds", "rss_bytes", "goroutines", "open_fds", "loaded_vcls", "bans", "history_bytes", "shifts_commanded", "shifts_seen"})
	num := func(v float64) string {
		if v < 0 {
			return ""
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	for _, sm := range s.samples {
		c, seen := seenBy(shifts, sm.at)
		w.Write([]string{strconv.Itoa(int(math.Round(sm.at.Sub(s.start).Seconds()))), num(sm.rss), num(sm.gor), num(sm.fds),
			num(sm.vcls), num(sm.bans), num(sm.history), strconv.Itoa(c), strconv.Itoa(seen)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
}

// chart draws the curves one above the other, minutes on the x axis.
func (s *soak) chart(t *testing.T, file string, shifts []shift) {
	end := s.samples[len(s.samples)-1].at.Sub(s.start).Minutes()
	series := func(get func(soakSample) float64) plotter.XYs {
		var xys plotter.XYs
		for _, sm := range s.samples {
			if v := get(sm); v >= 0 {
				xys = append(xys, plotter.XY{X: sm.at.Sub(s.start).Minutes(), Y: v})
			}
		}
		return xys
	}
	blue, red, green, grey := color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0x70, 0x70, 0x70, 0xff}
	panel := func(title, unit string, lines ...soakLine) []*plot.Plot {
		p := surgePlot(title, unit, end)
		p.X.Label.Text = "minutes"
		p.Y.Min = 0
		for _, l := range lines {
			addLine(p, l.xys, l.color, l.name)
		}
		return []*plot.Plot{p}
	}
	var commanded, seen plotter.XYs
	for _, sm := range s.samples {
		c, n := seenBy(shifts, sm.at)
		m := sm.at.Sub(s.start).Minutes()
		commanded, seen = append(commanded, plotter.XY{X: m, Y: float64(c)}), append(seen, plotter.XY{X: m, Y: float64(n)})
	}
	rows := [][]*plot.Plot{
		panel("the daemon's resident memory", "MiB", soakLine{"RSS", series(func(x soakSample) float64 {
			if x.rss < 0 {
				return -1
			}
			return x.rss / (1 << 20)
		}), blue}),
		panel("the daemon's goroutines and open files", "count",
			soakLine{"goroutines", series(func(x soakSample) float64 { return x.gor }), blue},
			soakLine{"open fds", series(func(x soakSample) float64 { return x.fds }), red}),
		panel("Varnish: loaded VCL programs and bans", "count",
			soakLine{"loaded VCLs", series(func(x soakSample) float64 { return x.vcls }), blue},
			soakLine{"MAIN.bans", series(func(x soakSample) float64 { return x.bans }), red}),
		panel("the history's bytes", "KiB", soakLine{"history", series(func(x soakSample) float64 {
			if x.history < 0 {
				return -1
			}
			return x.history / 1024
		}), green}),
		panel("shifts: commanded and seen in Varnish", "shifts",
			soakLine{"commanded", commanded, grey},
			soakLine{"seen in Varnish", seen, green}),
	}
	writePanels(t, file, rows, vg.Length(180*len(rows)), 4)
}

type soakLine struct {
	name  string
	xys   plotter.XYs
	color color.Color
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

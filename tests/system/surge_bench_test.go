package system

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkSurge is the open-loop surge on Debian's real WordPress (make
// bench-surge, docs/benchmarks.md): what Apache alone serves is measured
// first (C, requests/s in a closed loop of MaxRequestWorkers clients),
// then the same surge (a quiet trickle, then SURGE_FACTOR × C anonymous
// requests/s, plus 5 logged-in users at 1 request/s each) runs three ways
// side by side, each on a fresh cache: Varnish passing every page (the
// server without gearshift), gearshift's light pinned, the daemon in auto
// with the default config, heavy pinned.
// Then Apache stops for 30 s while light is on and quiet traffic flows.
// Last, the surge again, anonymous visitors only, on the PHP site that
// starts a session on every page (sessionSurge).
// The report goes to SURGE_OUT (markdown) with its chart beside it.
// STACK=fpm runs it all on Apache's event MPM with PHP-FPM instead of
// prefork with mod_php. FRONT=hitch runs, instead, the surge with the
// daemon in auto over plain http and through hitch (TLS, PROXY v2), side
// by side (tlsSurge, surge_tls_test.go).
//
//	go test -run '^$' -bench '^BenchmarkSurge$' -benchtime 1x -timeout 30m ./tests/system
func BenchmarkSurge(b *testing.B) {
	k := surgeKnobsFromEnv(b)
	st := startSurgeStackOn(b, k.stack, k.front == frontHitch)
	for range b.N {
		if k.front == frontHitch {
			st.tlsSurge(b, k)
			continue
		}
		if k.shape != shapeStep {
			st.shapeSurge(b, k)
			continue
		}
		rep := &surgeReport{knobs: k, loadBefore: surgeLoadavg(), cpus: runtime.NumCPU(), started: time.Now(), subscribers: len(surgeUsers), posts: len(st.wp.Posts)}
		rep.capacity = st.capacity(b, k.capacityFor)
		rep.rate = max(1, int(rep.capacity*k.factor+0.5))
		b.Logf("surge: Apache alone serves %.1f req/s; the surge offers %d req/s", rep.capacity, rep.rate)

		if only := os.Getenv("SURGE_RUNS"); only != "" {
			// While developing: these runs alone, their shifts logged, no report.
			gears := map[string]string{"auto": "", "heavy": "heavy", "none": "light", "plain": plainGear}
			for _, name := range strings.Split(only, ",") {
				st.settle(b, k.settle)
				st.surgeRun(b, name, gears[name], k, rep.rate)
			}
			continue
		}
		// auto first: its gear depends on the machine's load, which the
		// runs after it would raise for minutes.
		rep.settled = st.settle(b, k.settle)
		auto := st.surgeRun(b, "auto", "", k, rep.rate)
		auto.settled = rep.settled
		heavy := st.surgeRun(b, "heavy", "heavy", k, rep.rate)
		none := st.surgeRun(b, "none", "light", k, rep.rate)
		plain := st.surgeRun(b, "plain", plainGear, k, rep.rate)
		rep.runs = []*surgeRun{plain, none, auto, heavy}
		rep.outageSettled = st.settle(b, k.settle)
		rep.outage = st.outageRun(b, k)
		if os.Getenv("SURGE_SESSION") != "0" {
			rep.session = st.sessionSurge(b, k)
		}
		rep.maxConnections = st.maxConnections
		rep.elapsed = time.Since(rep.started)
		rep.write(b, k.out)
		for _, r := range rep.runs {
			s := r.summary()
			b.ReportMetric(s.anonOK*100, r.name+"-anon-ok-%")
			b.ReportMetric(s.userOK*100, r.name+"-user-ok-%")
		}
		b.ReportMetric(rep.capacity, "capacity-req/s")
		b.ReportMetric(0, "ns/op")
	}
}

// surgeUsers are the logged-in visitors, one request a second each.
var surgeUsers = []string{"alice", "bob", "carol", "dave", "erin"}

// surgePosts is how many posts the site has besides "Hello world!".
const surgePosts = 40

// surgeKnobs are the benchmark's durations and factor, from the
// environment, so that a smoke run can be short.
type surgeKnobs struct {
	quiet, surge                    time.Duration   // SURGE_QUIET (20s), SURGE_FOR (60s)
	factor                          float64         // SURGE_FACTOR (10): the surge's rate over C
	quietRate                       int             // SURGE_QUIET_RATE (2): anonymous req/s before the surge
	capacityFor                     time.Duration   // SURGE_CAPACITY_FOR (10s): the closed loop measuring C
	settle                          time.Duration   // SURGE_SETTLE (4m): the longest wait for a quiet machine
	outageWarm, outage, outageAfter time.Duration   // SURGE_OUTAGE_WARM (30s), SURGE_OUTAGE (30s), SURGE_OUTAGE_AFTER (15s)
	outageRate                      int             // SURGE_OUTAGE_RATE (20): anonymous req/s through the outage
	out                             string          // SURGE_OUT (/tmp/gearshift-bench-surge/surge.md)
	stack                           lampstack.Stack // STACK (mod_php): how Apache runs PHP, mod_php or fpm
	front                           string          // FRONT ("" or hitch): the surge through a TLS terminator too
	shape                           string          // SHAPE (step): step, ramp or bursts (surge_shape_test.go)
}

func surgeKnobsFromEnv(tb testing.TB) surgeKnobs {
	tb.Helper()
	dur := func(name string, def time.Duration) time.Duration {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			tb.Fatalf("%s=%q: want a duration such as 20s", name, v)
		}
		return d
	}
	num := func(name string, def float64) float64 {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			tb.Fatalf("%s=%q: want a positive number", name, v)
		}
		return f
	}
	k := surgeKnobs{
		quiet: dur("SURGE_QUIET", 20*time.Second), surge: dur("SURGE_FOR", 60*time.Second),
		factor: num("SURGE_FACTOR", 10), quietRate: int(num("SURGE_QUIET_RATE", 2)),
		capacityFor: dur("SURGE_CAPACITY_FOR", 10*time.Second), settle: dur("SURGE_SETTLE", 4*time.Minute),
		outageWarm: dur("SURGE_OUTAGE_WARM", 30*time.Second), outage: dur("SURGE_OUTAGE", 30*time.Second),
		outageAfter: dur("SURGE_OUTAGE_AFTER", 15*time.Second), outageRate: int(num("SURGE_OUTAGE_RATE", 20)),
		out: os.Getenv("SURGE_OUT"),
	}
	if k.out == "" {
		k.out = "/tmp/gearshift-bench-surge/surge.md"
	}
	k.stack = stackFromEnv(tb)
	switch k.front = os.Getenv("FRONT"); k.front {
	case "", frontHitch:
	default:
		tb.Fatalf("FRONT=%q: want hitch, or nothing", k.front)
	}
	switch k.shape = os.Getenv("SHAPE"); k.shape {
	case "":
		k.shape = shapeStep
	case shapeStep, shapeRamp, shapeBursts:
	default:
		tb.Fatalf("SHAPE=%q: want step, ramp or bursts", k.shape)
	}
	if k.shape != shapeStep && k.front != "" {
		tb.Fatalf("SHAPE=%s with FRONT=%s: a shape runs over plain http alone", k.shape, k.front)
	}
	if k.surge < time.Second || k.capacityFor < time.Second {
		tb.Fatalf("SURGE_FOR and SURGE_CAPACITY_FOR must be at least 1s")
	}
	return k
}

// stackFromEnv is the lampstack stack STACK names: mod_php (also when
// unset) or fpm.
func stackFromEnv(tb testing.TB) lampstack.Stack {
	tb.Helper()
	for _, s := range lampstack.Stacks {
		if v := os.Getenv("STACK"); v == s.String() || (v == "" && s == lampstack.ModPHP) {
			return s
		}
	}
	tb.Fatalf("STACK=%q: want mod_php or fpm", os.Getenv("STACK"))
	return lampstack.ModPHP
}

// surgeStack is WordPress on Apache and MariaDB behind one varnishd, all
// on loopback; each run starts a gearshift of its own on it.
type surgeStack struct {
	php     lampstack.Stack // how Apache runs PHP
	v       *varnishtest.Varnish
	wp      *lampstack.WordPress
	bin     map[string]string
	mix     *surgeMix // through Varnish
	backend profiles.Backend
	cookies []string // the logged-in users' Cookie headers
	// maxConnections is the backend.max_connections the daemons run
	// with, 0 when the config does not know the key.
	maxConnections int
	daemon         *runningDaemon
	apache         lampstack.Apache // the site's Apache (its access log is the backend's count)
	anonymousOnly  bool             // no logged-in users in the runs
	// edit, when set, changes the default config of the daemons fresh
	// starts (BenchmarkFPMSurge's sensor.phpfpm).
	edit func(*config.Config)
}

// apacheWorkers is StartApache's MaxRequestWorkers on mod_php, and the
// FPM stack's pm.max_children: the requests PHP serves at once.
const apacheWorkers = 16

// startSurgeStack starts the WordPress stack with PHP on php.
func startSurgeStack(tb testing.TB, php lampstack.Stack) *surgeStack {
	tb.Helper()
	return startSurgeStackOn(tb, php, false)
}

// startSurgeStackOn is startSurgeStack, with a PROXY listener on the
// varnishd (for hitch) when proxy is set.
func startSurgeStackOn(tb testing.TB, php lampstack.Stack, proxy bool) *surgeStack {
	tb.Helper()
	bin := lampstack.Need(tb, lampstack.WordPressPackages, lampstack.WordPressPrograms...)
	v := varnishtest.Start(tb, varnishtest.Config{Proxy: proxy})
	start := time.Now()
	wp := lampstack.StartWordPress(tb, tb.TempDir(), "http://"+v.HTTPAddr,
		lampstack.WordPressOptions{Posts: surgePosts, Subscribers: surgeUsers, Stack: php}, bin)
	tb.Logf("surge: MariaDB, WordPress (%d posts) and Apache (%s) up in %s", len(wp.Posts), php, time.Since(start).Round(time.Millisecond))
	port, _ := strconv.Atoi(wp.Backend[strings.LastIndexByte(wp.Backend, ':')+1:])
	st := &surgeStack{php: php, v: v, wp: wp, bin: bin, mix: newSurgeMix("http://"+v.HTTPAddr, v.HTTPAddr, wp.Posts),
		backend: profiles.BackendAt("127.0.0.1", port), apache: wp.Apache}
	tb.Cleanup(st.stopDaemon)
	return st
}

// capacity is what Apache alone serves of the anonymous mix: 200s per
// second in a closed loop of MaxRequestWorkers clients, after a warm-up.
func (st *surgeStack) capacity(tb testing.TB, d time.Duration) float64 {
	tb.Helper()
	mix := st.mix.at(fmt.Sprintf("http://%s:%d", st.backend.Host, st.backend.Port))
	// One transport for both: the warm-up's connections, each holding a
	// prefork worker, serve the measure.
	tr := transport()
	closed := func(d time.Duration) []hit {
		l := newLoad(mix, tr)
		l.attack(l.attacker(apacheWorkers, apacheWorkers), mix.anonymous(), vegeta.ConstantPacer{}, d, false)
		return l.wait()
	}
	closed(2 * time.Second) // Apache's workers started, PHP's opcache and MariaDB's buffers warm
	hits := closed(d)
	tr.CloseIdleConnections()
	ok := 0
	var lat []time.Duration
	for _, h := range hits {
		if h.ok() {
			ok++
			lat = append(lat, h.latency)
		}
	}
	cache, errs := tally(hits, false)
	tb.Logf("surge: Apache alone, %d clients for %s: %d requests, 200s by X-Cache %s, failures %s, median latency %s",
		apacheWorkers, d, len(hits), cache, errs, quantile(lat, 0.5))
	if ok == 0 {
		tb.Fatalf("Apache answered none of %d requests with a 200:\n%s", len(hits), lampstack.LastLines(filepath.Join(st.apache.Dir, "apache-error.log"), 10))
	}
	return float64(ok) / d.Seconds()
}

// settle waits, up to d, until the machine's load average is below half
// a CPU per CPU, and returns it then.
func (st *surgeStack) settle(tb testing.TB, d time.Duration) float64 {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		l := surgeLoadavg()
		if l/float64(runtime.NumCPU()) < 0.5 || time.Now().After(deadline) {
			return l
		}
		time.Sleep(2 * time.Second)
	}
}

func surgeLoadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

// fresh gives the next run an empty cache and a new daemon with the
// default config (only its targets, with the instance's name, backend and files set, and
// backend.max_connections to Apache's workers where the config has that
// key), forced to gear unless gear is "".
func (st *surgeStack) fresh(tb testing.TB, gear string) *runningDaemon {
	tb.Helper()
	st.stopDaemon()
	st.v.Restart()
	if gear == plainGear {
		st.daemon = nil
		st.usePlain(tb)
		return nil
	}
	path, cfg := configtest.ForVarnish(tb, st.v, func(cfg *config.Config) {
		// Only the address: the backend block's other keys keep their defaults.
		cfg.Backend.Host, cfg.Backend.Port = st.backend.Host, st.backend.Port
		cfg.PollInterval = config.Default().PollInterval
		// Its Varnish's counters and log, as the default config reads the
		// host's one instance (the traffic signals, backend_busy, front_door).
		cfg.Varnish.Targets[0].Name = st.v.WorkDir
		if st.edit != nil {
			st.edit(cfg)
		}
	})
	st.maxConnections = setMaxConnections(tb, path, apacheWorkers)
	d := spawnDaemon(tb, st.v, path, "NOTIFY_SOCKET=")
	d.cfg = cfg
	st.daemon = d
	d.eventually("daemon in sync on light", 2*time.Minute, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		return inSync(s, "light")
	})
	if gear != "" {
		if out, errOut, code := d.gs("force", gear); code != exitOK {
			tb.Fatalf("force %s: exit %d\n%s%s", gear, code, out, errOut)
		}
		d.eventually("in sync on "+gear, time.Minute, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			return inSync(s, gear)
		})
	}
	if st.cookies == nil {
		for _, u := range surgeUsers {
			st.cookies = append(st.cookies, lampstack.Login(lampstack.NewBrowser(tb, st.wp.URL, ""), u, st.wp.Password))
		}
	}
	return d
}

func (st *surgeStack) stopDaemon() {
	d := st.daemon
	if d == nil || !d.running() {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
}

// setMaxConnections adds backend.max_connections: n to the config at
// path when gearshift accepts the key (config check), and returns n, or
// leaves the file as it was and returns 0.
func setMaxConnections(tb testing.TB, path string, n int) int {
	tb.Helper()
	orig, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(orig, &doc); err != nil {
		tb.Fatal(err)
	}
	be, _ := doc["backend"].(map[string]any)
	if be == nil {
		tb.Fatalf("%s has no backend block", path)
	}
	be["max_connections"] = n
	edited, err := yaml.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		tb.Fatal(err)
	}
	if _, errOut, code := runGearshift(tb, "config", "check", "--config", path); code == exitOK {
		return n
	} else if !strings.Contains(errOut, "max_connections") {
		tb.Fatalf("config check of the surge's config: exit %d: %s", code, errOut)
	}
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		tb.Fatal(err)
	}
	return 0
}

// monitor samples, once a second, Apache's access log (the requests that
// reached it) and, twice a second, the daemon's gear.
type monitor struct {
	start   time.Time
	lines   *lampstack.LineCounter
	sock    string
	mu      sync.Mutex
	backend []int         // lines logged by the end of each second
	gears   []gearAt      // the gear as the daemon's status said it
	done    chan struct{} //
	wg      sync.WaitGroup
}

type gearAt struct {
	at   time.Duration
	gear string
}

func (st *surgeStack) watch(tb testing.TB, start time.Time) *monitor {
	m := &monitor{start: start, lines: lampstack.NewLineCounter(tb, lampstack.AccessLog(st.apache.Dir)),
		done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
				n := m.lines.Count()
				m.mu.Lock()
				m.backend = append(m.backend, n)
				m.mu.Unlock()
			}
		}
	}()
	if st.daemon == nil {
		return m // plain: no gear to follow
	}
	m.sock = st.daemon.cfg.Control.Socket
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		c := api.NewClient(m.sock)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s, err := c.Status(ctx)
			cancel()
			if err == nil {
				m.mu.Lock()
				m.gears = append(m.gears, gearAt{time.Since(m.start), s.State})
				m.mu.Unlock()
			}
			select {
			case <-m.done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return m
}

func (m *monitor) stop() {
	close(m.done)
	m.wg.Wait()
	m.backend = append(m.backend, m.lines.Count())
}

// backendAt is the backend requests logged by t from the start (the
// count at the end of the second t falls in).
func (m *monitor) backendAt(t time.Duration) int {
	i := min(int(t/time.Second), len(m.backend))
	if i <= 0 {
		return 0
	}
	return m.backend[i-1]
}

// gearAt is the last gear seen at or before t ("" before the first).
func (m *monitor) gearAt(t time.Duration) string {
	g := ""
	for _, x := range m.gears {
		if x.at > t {
			break
		}
		g = x.gear
	}
	return g
}

// surgeRun is one run's record.
type surgeRun struct {
	name       string
	hits       []hit
	surgeAt    time.Duration // the surge's start, from the run's start
	surgeEnd   time.Duration
	mon        *monitor
	settled    float64 // load average at the start (auto)
	loadStart  float64
	outageFrom time.Duration // the outage run: Apache stopped
	outageTo   time.Duration // and answering again
	purge      *purgeProbe   // auto and heavy: a publish half-way through the surge
}

// surgeRun runs the quiet trickle and the surge against a fresh cache
// and daemon, forced to gear unless gear is "".
func (st *surgeStack) surgeRun(tb testing.TB, name, gear string, k surgeKnobs, rate int) *surgeRun {
	tb.Helper()
	st.fresh(tb, gear)
	tb.Logf("surge: run %s: %s of %d req/s, then %s of %d req/s; load average %.2f", name, k.quiet, k.quietRate, k.surge, rate, surgeLoadavg())
	r := &surgeRun{name: name, surgeAt: k.quiet, surgeEnd: k.quiet + k.surge, loadStart: surgeLoadavg()}
	l := newLoad(st.mix, nil)
	r.mon = st.watch(tb, l.start)
	anon := phasePacer{{k.quietRate, k.quiet}, {rate, k.surge}}
	l.attack(l.attacker(32, 0), st.mix.anonymous(), anon, anon.total(), false)
	if !st.anonymousOnly {
		l.attack(l.attacker(32, 0), st.mix.users(st.cookies), vegeta.ConstantPacer{Freq: len(st.cookies), Per: time.Second}, anon.total(), true)
	}
	if (name == "auto" || name == "heavy") && !st.anonymousOnly {
		r.purge = st.publishAt(tb, l.start, k.quiet+k.surge/2)
	}
	r.hits = l.wait()
	if r.purge != nil {
		r.purge.wg.Wait()
	}
	if st.daemon != nil {
		st.logShifts(tb, r, l.start)
	}
	l.tr.CloseIdleConnections()
	r.mon.stop()
	st.drain()
	s := r.summary()
	tb.Logf("surge: run %s: anonymous %.1f %% ok, logged-in %.1f %% ok, time to protect %s; %s", name, s.anonOK*100, s.userOK*100, s.protect, r.firstSeconds(8))
	return r
}

// drain waits until Apache has stopped logging requests for 2 s (at most
// 30 s): the queue a run left behind is not the next one's.
func (st *surgeStack) drain() {
	file := lampstack.AccessLog(st.apache.Dir)
	size := func() int64 { fi, _ := os.Stat(file); return fi.Size() }
	last, still := size(), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if s := size(); s != last {
			last, still = s, time.Now()
		} else if time.Since(still) >= 2*time.Second {
			return
		}
	}
}

// outageRun: the daemon in auto with light on and quiet traffic over the
// same mix; after outageWarm, Apache stops for outage, then starts again.
func (st *surgeStack) outageRun(tb testing.TB, k surgeKnobs) *surgeRun {
	tb.Helper()
	st.fresh(tb, "")
	r := &surgeRun{name: "outage", loadStart: surgeLoadavg()}
	total := k.outageWarm + k.outage + k.outageAfter
	l := newLoad(st.mix, nil)
	r.mon = st.watch(tb, l.start)
	l.attack(l.attacker(32, 0), st.mix.anonymous(), vegeta.ConstantPacer{Freq: k.outageRate, Per: time.Second}, total, false)
	l.attack(l.attacker(32, 0), st.mix.users(st.cookies), vegeta.ConstantPacer{Freq: len(st.cookies), Per: time.Second}, total, true)
	time.Sleep(k.outageWarm)
	r.outageFrom = time.Since(l.start)
	lampstack.StopApache(tb, st.wp.Apache)
	time.Sleep(max(0, k.outageWarm+k.outage-time.Since(l.start)))
	lampstack.StartApache(tb, st.wp.Apache, st.bin)
	r.outageTo = time.Since(l.start)
	tb.Logf("surge: outage: Apache stopped at +%.1fs, answering again at +%.1fs", r.outageFrom.Seconds(), r.outageTo.Seconds())
	r.hits = l.wait()
	l.tr.CloseIdleConnections()
	r.mon.stop()
	return r
}

// plainGear is the run without gearshift: no daemon, and a VCL that
// passes every request to the backend, as 0.3's light did with pages.
const plainGear = "plain"

// usePlain loads and uses that VCL, with Varnish's default backend
// settings (no connection limit, no probe).
func (st *surgeStack) usePlain(tb testing.TB) {
	tb.Helper()
	file := filepath.Join(st.v.Dir, "plain.vcl")
	vcl := fmt.Sprintf("vcl 4.1;\nbackend default { .host = %q; .port = \"%d\"; }\nsub vcl_recv { return (pass); }\n", st.backend.Host, st.backend.Port)
	if err := os.WriteFile(file, []byte(vcl), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := st.v.Adm("vcl.load", "plain", file); err != nil {
		tb.Fatalf("vcl.load plain: %v\n%s", err, out)
	}
	if out, err := st.v.Adm("vcl.use", "plain"); err != nil {
		tb.Fatalf("vcl.use plain: %v\n%s", err, out)
	}
}

//go:build soak

// The soak runs for minutes to hours: make soak runs it (SOAK=30m by
// default), make test a 3-minute one (go test -tags soak -run TestSoak).

package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/promtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// The soak's knobs and bounds.
const (
	soakPoll      = 100 * time.Millisecond // the daemon's poll_interval
	soakStep      = 1500 * time.Millisecond
	soakSampleIv  = 10 * time.Second
	soakWatchIv   = 50 * time.Millisecond // how often vcl.list is read
	soakMaxBytes  = 1 << 20               // history.max_bytes
	soakHookLimit = 2 * time.Second       // hooks.timeout

	// The slope bounds, over the second half of the run: a least-squares
	// line through the 10 s samples, times the half's length, is the
	// growth. It may be at most the rate times the half, or the floor,
	// whichever is larger. The floor is the noise of a short run (the Go
	// heap breathes by a MiB or two between collections; a hook or a
	// reconnect holds an fd and a goroutine or two for a moment), and it
	// is the bound of any run shorter than about 90 minutes for RSS, 50
	// for goroutines, 35 for fds: a short run catches a fast leak only.
	// The rates are what longer runs resolve: 4 MiB an hour is 3 GiB in a
	// month. One goroutine or fd a shift (hundreds a run) or a reload
	// (tens in 30 minutes) passes the floors.
	rssRate, rssFloor = 4 << 20, 3 << 20 // bytes per hour, bytes
	gorRate, gorFloor = 10, 4            // goroutines per hour, goroutines
	fdRate, fdFloor   = 10, 3            // fds per hour, fds

	// Varnish may hold the profiles of two configs (a reload loads the
	// new before it discards the old), the boot VCL, and discarded ones
	// still cooling (vcl_cooldown=1 s here); at the end, once quiet,
	// only the three profiles and the boot VCL.
	maxLoadedVCLs = 2*3 + 1 + 6
	endLoadedVCLs = 3 + 1
	maxBans       = 50 // and the signed-in writes an object's lifetime back (see results)
)

// gearCycle drives the injected value through every transition:
// light→moderate→heavy→moderate→light→heavy→light.
var gearCycle = []string{"5", "10", "5", "0", "10", "0"}

// TestSoak runs the daemon at poll_interval 100ms in front of a real
// varnishd, Apache and PHP for GEARSHIFT_SOAK (30m by default), shifting
// gears every 1.5 s on an injected value, with traffic and signed-in
// writes, under faults on a schedule; every 10 s it records the daemon's
// RSS, goroutines and fds, Varnish's loaded VCLs and bans, the history's
// bytes and the shifts commanded and seen in Varnish, and writes them as
// a CSV and a chart into GEARSHIFT_SOAK_OUT (/tmp/gearshift-soak). It
// fails when the daemon exits or restarts, a commanded shift did not
// reach Varnish within 2 polls of it being reachable with its profiles,
// RSS, goroutines or fds grow (see the bounds above), loaded VCLs or bans
// pass their bounds, the history's past days exceed max_bytes, a
// transition is missing from the history, or a signed-in user loses
// their session.
func TestSoak(t *testing.T) {
	length := 30 * time.Minute
	if s := os.Getenv("GEARSHIFT_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 2*time.Minute {
			t.Fatalf("GEARSHIFT_SOAK=%q: want a duration of 2m or more", s)
		}
		length = d
	}
	out := os.Getenv("GEARSHIFT_SOAK_OUT")
	if out == "" {
		out = "/tmp/gearshift-soak"
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.RequireRoot(t, "the history's disk is a small tmpfs the soak fills")
	s := startSoak(t)
	t.Logf("soak for %s, results in %s", length, out)
	s.run(t, length)
	s.results(t, out, length)
}

type soak struct {
	dir      string
	v        *varnishtest.Varnish
	d        *runningDaemon
	pid      int
	cfg      *config.Config
	path     string // the config file
	inject   string
	hangFlag string
	disk     string // the tmpfs holding the history
	prom     *promtest.Server
	site     lampstack.Apache
	password string

	start    time.Time
	watchEnd time.Time // the watcher's last read
	mu       sync.Mutex
	watch    []vclSample  // vcl.list every 50 ms
	samples  []soakSample // every 10 s
	windows  []faultWindow
	counts   map[string]int

	traffic trafficCounts
}

type vclSample struct {
	at     time.Time
	ok     bool
	active string // its gear: light, moderate, heavy, or "" for another VCL
	loaded int    // VCL programs (not labels)
	ours   int    // gearshift's programs
}

type soakSample struct {
	at                  time.Time
	rss, gor, fds       float64
	vcls, bans, history float64
	writes              float64 // signed-in writes so far
	uptime              int64
}

// faultWindow is a span in which a fault was in force.
type faultWindow struct {
	name       string
	from, till time.Time
}

type trafficCounts struct {
	pages, errors, writes, drops, logins atomic.Int64
}

func startSoak(t *testing.T) *soak {
	t.Helper()
	s := &soak{dir: t.TempDir(), counts: map[string]int{}}
	s.disk = filepath.Join(s.dir, "disk")
	os.Mkdir(s.disk, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "gearshift-soak", s.disk).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs for the history: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", s.disk).Run() })

	bin := lampstack.Need(t, "apache2, libapache2-mod-php", lampstack.ApachePrograms...)
	siteDir := filepath.Join(s.dir, "site")
	os.MkdirAll(siteDir, 0o755)
	lampstack.Searchable(t, siteDir) // Apache's user reads the site
	site, users := lampstack.StartSessionSite(t, lampstack.ModPHP, siteDir, 0, bin)
	s.site, s.password = site, users["alice"]
	s.v = varnishtest.Start(t, varnishtest.Config{})
	metricsAddr := testenv.FreeAddr(t)
	s.prom = promtest.Start(t, metricsAddr)

	s.inject = filepath.Join(s.dir, "injected")
	os.WriteFile(s.inject, []byte("0\n"), 0o644)
	s.hangFlag = filepath.Join(s.dir, "hang")
	s.path, s.cfg = testConfig(t, s.v, func(cfg *config.Config) {
		injectedGears(s.inject)(cfg)
		cfg.PollInterval = timefmt.Duration(soakPoll)
		cfg.Backend = profiles.BackendAt("127.0.0.1", site.Port)
		cfg.History.Dir = filepath.Join(s.disk, "history")
		cfg.History.MaxBytes = soakMaxBytes
		cfg.MetricsListen = metricsAddr
		cfg.Sensor.Prometheus = sensor.PrometheusConfig{
			URL:     s.prom.URL,
			Timeout: timefmt.Duration(500 * time.Millisecond),
			MaxAge:  timefmt.Duration(30 * time.Second),
			Signals: map[string]string{"fleet_gear": "max(gearshift_gear_level)"},
		}
		// A hook that hangs while the flag is there; hooks.timeout kills it.
		cfg.Hooks.OnChange = []string{"/bin/sh", "-c", "if [ -e " + s.hangFlag + " ]; then sleep 600; fi"}
		cfg.Hooks.Timeout = timefmt.Duration(soakHookLimit)
	})
	s.d = spawnDaemon(t, s.v, s.path, "NOTIFY_SOCKET=")
	s.d.cfg = s.cfg
	t.Cleanup(func() {
		if s.d.running() {
			s.d.cmd.Process.Signal(syscall.SIGTERM)
			<-s.d.exited
		}
		if t.Failed() {
			t.Logf("gearshift output (last 4 KiB):\n%s", tail(s.d.out.String(), 4096))
		}
	})
	s.pid = s.d.cmd.Process.Pid
	s.d.eventually("daemon in sync on light", 90*time.Second, func() error {
		st, err := s.d.status()
		if err != nil {
			return err
		}
		return inSync(st, "light")
	})
	return s
}

// writeConfig writes cfg to the soak's config file.
func (s *soak) writeConfig(t *testing.T, cfg *config.Config) {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.writeRaw(t, b)
}

// writeRaw replaces the config file in one step (rename), as an editor's
// save does.
func (s *soak) writeRaw(t *testing.T, b []byte) {
	t.Helper()
	tmp := s.path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		t.Fatal(err)
	}
}

func (s *soak) count(name string) {
	s.mu.Lock()
	s.counts[name]++
	s.mu.Unlock()
}

func (s *soak) window(name string, from time.Time) {
	s.mu.Lock()
	s.windows = append(s.windows, faultWindow{name, from, time.Now()})
	s.mu.Unlock()
}

// run drives the gears, the traffic, the watcher and the sampler for
// length, with the faults on their schedule.
func (s *soak) run(t *testing.T, length time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	s.start = time.Now()
	spawn := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }

	driving, stopDriving := context.WithCancel(ctx)
	defer stopDriving()
	spawn(func() { s.drive(driving) })
	spawn(func() { s.watchVarnish(ctx) })
	for i := 0; i < 2; i++ {
		spawn(func() { s.anonymous(ctx) })
	}
	spawn(func() { s.signedIn(ctx) })
	spawn(func() { s.sampleEvery(ctx, t) })

	// The faults, each at least once: spread over the run between a
	// warm-up and a cool-down, a minute apart at most (a long run repeats
	// them); the faults that last do so for 70 % of the gap, a minute for
	// the full disk and two for Prometheus at most, as an admin would see.
	faults := s.faults(t)
	warm, cool := 15*time.Second, 25*time.Second
	gap := min(time.Minute, (length-warm-cool)/time.Duration(len(faults)))
	deadline := s.start.Add(length)
	sleepUntil := func(at time.Time) bool {
		select {
		case <-time.After(time.Until(at)):
			return s.d.running()
		case <-s.d.exited:
			return false
		}
	}
	next := s.start.Add(warm)
	for i := 0; next.Add(gap).Before(deadline.Add(-cool + time.Second)); i++ {
		if !sleepUntil(next) {
			break
		}
		f := faults[i%len(faults)]
		f.do(gap * 7 / 10)
		s.count(f.name)
		next = next.Add(gap)
	}
	sleepUntil(deadline)
	if !s.d.running() {
		t.Fatalf("the daemon exited during the soak (%v)", s.d.exitErr)
	}
	// The gears come to rest while the watcher still reads Varnish; a
	// shift after it stopped is not judged.
	stopDriving()
	time.Sleep(5 * time.Second)
	cancel()
	wg.Wait()
	s.watchEnd = time.Now()
	if n := len(s.watch); n > 0 {
		s.watchEnd = s.watch[n-1].at
	}
}

type fault struct {
	name string
	do   func(lasting time.Duration)
}

// faults are the faults of the schedule, in the order they come.
func (s *soak) faults(t *testing.T) []fault {
	good := 0
	return []fault{
		{"cache child killed", func(time.Duration) {
			from := time.Now()
			if pid := s.v.CacheChild(); pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			} else {
				t.Errorf("no cache child of varnishd -n %s to kill", s.v.WorkDir)
			}
			s.waitVarnish(30 * time.Second)
			s.window("child", from)
		}},
		{"varnishd restarted", func(time.Duration) {
			from := time.Now()
			s.v.Restart()
			s.window("restart", from)
		}},
		{"good reload", func(time.Duration) {
			good++
			cfg := *s.cfg
			cfg.Profiles.StaticTTL = timefmt.Duration(time.Duration(1+good%2) * time.Hour) // new VCL text, new names
			s.writeConfig(t, &cfg)
			if out, errOut, code := s.d.gs("reload"); code != 0 {
				t.Errorf("reload of a good config: exit %d\n%s%s", code, out, errOut)
			}
		}},
		{"bad reload", func(time.Duration) {
			// Two ways to be wrong, in turn: a file that is no config,
			// and profiles Varnish will not compile (loaded, refused,
			// unloaded).
			cfg := *s.cfg
			cfg.Profiles.StaticTTL = timefmt.Duration(3 * time.Hour)
			bad := filepath.Join(s.dir, "bad.vcl")
			os.WriteFile(bad, []byte("vcl 4.1;\nthis does not compile;\n"), 0o644)
			cfg.Profiles.Heavy.VCLFile = bad
			before, _ := s.d.status()
			if s.counts["bad reload"]%2 == 0 {
				s.writeRaw(t, []byte("poll_interval: [\n"))
			} else {
				s.writeConfig(t, &cfg)
			}
			syscall.Kill(s.pid, syscall.SIGHUP) // gearshift reload would refuse to send it
			s.d.eventually("the bad reload reported", time.Minute, func() error {
				st, err := s.d.status()
				if err != nil {
					return err
				}
				if st.ConfigError == "" {
					return fmt.Errorf("no config_error yet")
				}
				return nil
			})
			if before != nil && before.ConfigError != "" {
				t.Errorf("config_error before the bad reload: %s", before.ConfigError)
			}
			s.writeConfig(t, s.cfg)
			if out, errOut, code := s.d.gs("reload"); code != 0 {
				t.Errorf("reload after a bad one: exit %d\n%s%s", code, out, errOut)
			}
		}},
		{"history disk full", func(lasting time.Duration) {
			from := time.Now()
			filler := filepath.Join(s.disk, "filler")
			fill(filler)
			time.Sleep(min(lasting, time.Minute))
			os.Remove(filler)
			s.window("disk", from)
		}},
		{"prometheus down", func(lasting time.Duration) {
			from := time.Now()
			s.prom.Stop()
			time.Sleep(min(lasting, 2*time.Minute))
			s.prom.Restart(t)
			s.window("prometheus", from)
		}},
		{"hook hangs", func(lasting time.Duration) {
			from := time.Now()
			os.WriteFile(s.hangFlag, nil, 0o644)
			time.Sleep(lasting)
			os.Remove(s.hangFlag)
			s.window("hook", from)
		}},
		{"SIGHUP storm", func(time.Duration) {
			for i := 0; i < 50; i++ {
				syscall.Kill(s.pid, syscall.SIGHUP)
				time.Sleep(5 * time.Millisecond)
			}
		}},
	}
}

// fill writes zeros to path until the disk is full.
func fill(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

// waitVarnish waits until varnishd answers HTTP again (its manager
// restarts a killed child).
func (s *soak) waitVarnish(d time.Duration) {
	lampstack.WaitFor(d, func() bool {
		resp, err := http.Get(s.v.URL("/style.css"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// drive moves the injected value through gearCycle, a step every 1.5 s.
func (s *soak) drive(ctx context.Context) {
	tick := time.NewTicker(soakStep)
	defer tick.Stop()
	for i := 0; ; i++ {
		os.WriteFile(s.inject, []byte(gearCycle[i%len(gearCycle)]+"\n"), 0o644)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// watchVarnish reads vcl.list and the child's status every 50 ms on an
// admin connection of its own: what Varnish runs, whatever the daemon
// says.
func (s *soak) watchVarnish(ctx context.Context) {
	var c *varnishadm.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	tick := time.NewTicker(soakWatchIv)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c == nil {
			c, _ = varnishadm.NewFromFile(s.v.AdminAddr, s.v.SecretFile)
		}
		sample := vclSample{at: time.Now()}
		if c != nil {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			vcls, err := c.VCLList(lctx)
			cancel()
			if err != nil {
				c.Close()
				c = nil
			} else {
				// A manager whose cache child is restarting (killed)
				// answers vcl.list but not vcl.use: reachable once the
				// child runs.
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err := c.Run(lctx, "status")
				cancel()
				sample.ok = err == nil && strings.Contains(st, "running")
				for _, v := range vcls {
					if v.IsLabel() {
						continue
					}
					sample.loaded++
					gear := gearOfVCL(v.Name)
					if gear != "" {
						sample.ours++
					}
					if v.Active() {
						sample.active = gear
					}
				}
			}
		}
		s.mu.Lock()
		s.watch = append(s.watch, sample)
		s.mu.Unlock()
	}
}

// gearOfVCL is the gear of one of gearshift's VCL names
// (gearshift-<gear>-<hash>), or "".
func gearOfVCL(name string) string {
	for _, g := range []string{"light", "moderate", "heavy"} {
		if strings.HasPrefix(name, "gearshift-"+g+"-") {
			return g
		}
	}
	return ""
}

// anonymous asks for pages and a static file through Varnish, as
// visitors do.
func (s *soak) anonymous(ctx context.Context) {
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		path := []string{"/", "/style.css", "/login.php"}[i%3]
		resp, err := client.Get(s.v.URL(path))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != 200 {
			s.traffic.errors.Add(1)
		} else {
			s.traffic.pages.Add(1)
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// signedIn signs alice in and saves a preference every half second,
// checking each answer is her page with what she saved: a page for
// nobody is a lost session (a drop), a refused connection (varnishd
// restarting) an error.
func (s *soak) signedIn(ctx context.Context) {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Timeout: 5 * time.Second, Jar: jar}
	get := func(path string, form url.Values) (string, string, bool) {
		var resp *http.Response
		var err error
		if form == nil {
			resp, err = client.Get(s.v.URL(path))
		} else {
			resp, err = client.PostForm(s.v.URL(path), form)
		}
		if err != nil {
			return "", "", false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Request.URL.Path, resp.StatusCode == 200
	}
	signedIn := false
	colours := []string{"blue", "green", "orange"}
	for i := 0; ctx.Err() == nil; i++ {
		sleepCtx(ctx, 500*time.Millisecond)
		if !signedIn {
			body, _, ok := get("/login.php", nil)
			m := csrfRE.FindStringSubmatch(body)
			if !ok || m == nil {
				s.traffic.errors.Add(1)
				continue
			}
			body, at, ok := get("/login.php", url.Values{"csrf": {m[1]}, "name": {"alice"}, "password": {s.password}})
			if !ok || at != "/account.php" {
				s.traffic.errors.Add(1)
				continue
			}
			s.traffic.logins.Add(1)
			signedIn = true
		}
		body, at, ok := get("/prefs.php", nil)
		if !ok {
			s.traffic.errors.Add(1)
			continue
		}
		m := csrfRE.FindStringSubmatch(body)
		if at == "/login.php" || m == nil {
			s.traffic.drops.Add(1)
			signedIn = false
			continue
		}
		colour := colours[i%len(colours)]
		body, at, ok = get("/prefs.php", url.Values{"csrf": {m[1]}, "colour": {colour}})
		switch {
		case !ok:
			s.traffic.errors.Add(1)
		case at == "/login.php":
			s.traffic.drops.Add(1)
			signedIn = false
		case strings.Contains(body, `value="`+colour+`" selected`):
			s.traffic.writes.Add(1)
		default:
			s.traffic.errors.Add(1)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// sampleEvery records the daemon's and Varnish's figures every 10 s.
func (s *soak) sampleEvery(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(soakSampleIv)
	defer tick.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *soak) sample() {
	sm := soakSample{at: time.Now(), rss: -1, gor: -1, fds: -1, vcls: -1, bans: -1, history: -1, uptime: -1}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid)); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				sm.rss = kb * 1024
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.pid)); err == nil {
		sm.fds = float64(len(fds))
	}
	if v, ok := scrapeMetric("http://"+s.cfg.MetricsListen+"/metrics", "go_goroutines"); ok {
		sm.gor = v
	}
	if out, err := exec.Command("varnishstat", "-n", s.v.WorkDir, "-1", "-f", "MAIN.bans").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) >= 2 && f[0] == "MAIN.bans" {
			sm.bans, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	s.mu.Lock()
	if n := len(s.watch); n > 0 && s.watch[n-1].ok {
		sm.vcls = float64(s.watch[n-1].loaded)
	}
	s.mu.Unlock()
	sm.history = float64(dirBytes(s.cfg.History.Dir))
	sm.writes = float64(s.traffic.writes.Load())
	if st, err := s.d.status(); err == nil {
		sm.uptime = st.UptimeSeconds
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

func scrapeMetric(u, name string) (float64, bool) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

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
// once the profiles are compiled again. A shift the next one overtook
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
			if ready.IsZero() && w[k].ok && w[k].ours >= 3 && !w[k].at.Before(sh.at) {
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
	half := s.samples[len(s.samples)/2:]
	hours := half[len(half)-1].at.Sub(half[0].at).Hours()
	growth := func(name string, get func(soakSample) float64, rate, floor float64) float64 {
		g := slope(half, get) * hours
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
	// Each signed-in write bans its session's pages (read-your-own-
	// writes); every ban but the newest is a duplicate, completed, and
	// Varnish frees the list's tail only once no object in the cache is
	// older than it: a ban lives as long as the longest-lived object that
	// nobody asks for (a static file's TTL, heavy's grace and
	// stale_if_error's keep). So the list may hold the writes of that span
	// and 50 more; anything else that bans, or a list Varnish never
	// shortens, passes it.
	life := time.Duration(s.cfg.Profiles.StaticTTL + s.cfg.Profiles.HeavyGrace + s.cfg.Profiles.StaleIfError)
	for i, sm := range s.samples {
		recent := sm.writes
		for _, old := range s.samples[:i] {
			if sm.at.Sub(old.at) <= life {
				recent = sm.writes - old.writes
				break
			}
		}
		if bound := maxBans + recent; sm.bans > bound {
			t.Errorf("MAIN.bans %.0f at %s, bound %.0f (%d and the %.0f writes of the %s before)",
				sm.bans, sm.at.Sub(s.start).Round(time.Second), bound, maxBans, recent, life)
			break
		}
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

// slope is the least-squares slope of get over the samples, per hour;
// samples without a value (-1) are left out.
func slope(xs []soakSample, get func(soakSample) float64) float64 {
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
		return 0
	}
	return (n*sxy - sx*sy) / d
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

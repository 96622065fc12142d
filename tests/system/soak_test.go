//go:build soak

// The soak runs for minutes to hours: make soak runs it (SOAK=30m by
// default), make test a 3-minute one (go test -tags soak -run TestSoak).

package system

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
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
	maxBans       = 10 // the boot ban and slack; and the bans the soak caused (judgeBans)
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
// pass their bounds (bans: judgeBans), too few samples of any of them
// were read, the history's past days exceed max_bytes, a
// transition is missing from the history, a signed-in user loses
// their session, or the visitors (each with an X-Forwarded-For of its
// own) did not reach Apache as themselves (judgeVisitors).
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

	traffic  trafficCounts
	visitors atomic.Uint64 // the anonymous requests so far: each a visitor of the crowd
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
	s.path, s.cfg = configtest.ForVarnish(t, s.v, func(cfg *config.Config) {
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

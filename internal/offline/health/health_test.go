package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/apitest"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

// fakeDaemon answers Status with st, or err; after started it answers st.
type fakeDaemon struct {
	mu      sync.Mutex
	st      *api.Status
	err     error
	block   bool // never answer: honour ctx only
	started bool
	starts  int
}

func (f *fakeDaemon) Status(ctx context.Context) (*api.Status, error) {
	f.mu.Lock()
	st, err, block := f.st, f.err, f.block
	if f.started {
		st, err = apitest.HealthyStatus(), nil
	}
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, fmt.Errorf("%w on /run/x.sock: %v", api.ErrUnreachable, ctx.Err())
	}
	return st, err
}

func (f *fakeDaemon) start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	f.started = true
	return nil
}

func testChecker(tb testing.TB, d *fakeDaemon, o Options) *Checker {
	tb.Helper()
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxAge == 0 {
		o.MaxAge = 30 * time.Second
	}
	cfg := config.Default()
	return &Checker{
		Opts:       o,
		Config:     cfg,
		ConfigPath: "/etc/gearshift/gearshift.yaml",
		Client:     d,
		Now:        func() time.Time { return apitest.Now },
		Running:    func() (int, error) { return 0, nil },
		Start:      d.start,
		Systemd:    func(context.Context) (bool, error) { return false, nil },
		LockPath:   filepath.Join(tb.TempDir(), "check.lock"),
		StartWait:  time.Second,
		Margin:     50 * time.Millisecond,
	}
}

var errRefused = fmt.Errorf("%w on /run/gearshift/gearshift.sock: connect: no such file or directory", api.ErrUnreachable)

func TestCheckGolden(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(st *api.Status)
		err    error
		opts   Options
		setup  func(c *Checker, d *fakeDaemon)
		code   int
		golden string
	}{
		{name: "ok", code: 0, golden: "ok"},
		{name: "ok quiet prints nothing", opts: Options{Quiet: true}, code: 0, golden: "ok-quiet"},
		{name: "forced without --warn-forced", edit: func(st *api.Status) {
			st.Mode, st.State, st.Reason = "forced", "heavy", "forced by operator until 15:34"
			u := apitest.Now.Add(30 * time.Minute)
			st.ForcedUntil = &u
		}, code: 0, golden: "ok-forced"},
		{name: "warning forced", edit: func(st *api.Status) {
			st.Mode, st.State, st.Reason = "forced", "heavy", "forced by operator until 15:34"
			u := apitest.Now.Add(30 * time.Minute)
			st.ForcedUntil = &u
		}, opts: Options{WarnForced: true}, code: 1, golden: "warning-forced"},
		{name: "warning forced until auto", edit: func(st *api.Status) {
			st.Mode, st.State, st.Reason = "forced", "light", "forced by operator"
		}, opts: Options{WarnForced: true}, code: 1, golden: "warning-forced-until-auto"},
		{name: "warning state", edit: func(st *api.Status) {
			st.State, st.Reason = "heavy", "load_per_cpu 1.82 >= 1.50 for 3 samples"
			st.Sample.Signals["load_per_cpu"] = apitest.F64(1.82)
		}, opts: Options{WarnStates: []string{"moderate", "heavy"}}, code: 1, golden: "warning-state"},
		{name: "warning multi-line config error on one line", edit: func(st *api.Status) {
			st.ConfigError = "config /etc/gearshift/gearshift.yaml has 2 problems:\ncpus: must be 0 (detect) or a number of CPUs, got -1 (line 3)\nprofiles.never_cache[0]: \"a|b\" is odd"
		}, code: 1, golden: "warning-config-multiline"},
		{name: "warning config reload failed", edit: func(st *api.Status) {
			st.ConfigError = "config /etc/gearshift/gearshift.yaml: on_exit: must be one of keep, light, moderate, heavy, got \"stop\""
		}, code: 1, golden: "warning-config"},
		{name: "warning config file invalid", setup: func(c *Checker, _ *fakeDaemon) {
			c.ConfigErr = &config.Error{File: c.ConfigPath, Problems: []config.Problem{{Path: "cpus", Msg: "must be 0 (detect) or a number of CPUs, got -1", Line: 3}, {Path: "on_exit", Msg: "x"}}}
		}, code: 1, golden: "warning-config-file"},
		{name: "critical not running", err: errRefused, code: 2, golden: "critical-not-running"},
		{name: "critical running but refusing", err: errRefused, setup: func(c *Checker, _ *fakeDaemon) {
			c.Running = func() (int, error) { return 4242, nil }
		}, code: 2, golden: "critical-not-answering"},
		{name: "critical silent", setup: func(c *Checker, d *fakeDaemon) {
			d.block = true
			c.Opts.Timeout = 20 * time.Millisecond
		}, code: 2, golden: "critical-silent"},
		{name: "critical target unreachable", edit: func(st *api.Status) {
			st.Targets[0].Reachable, st.Targets[0].InSync, st.Targets[0].ActiveVCL = false, false, ""
			st.Targets[0].Error = "dial tcp 127.0.0.1:6082: connect: connection refused"
		}, code: 2, golden: "critical-target-unreachable"},
		{name: "critical target out of sync and config warning", edit: func(st *api.Status) {
			st.Targets = append(st.Targets, api.TargetStatus{Admin: "10.0.0.2:6082", Reachable: true, ActiveVCL: "boot", LastSwitchMS: 1.5})
			st.ConfigError = "varnish refused the heavy profile"
		}, code: 2, golden: "critical-out-of-sync"},
		{name: "warning foreign vcl.use in the last hour", edit: func(st *api.Status) {
			at := apitest.Now.Add(-12 * time.Minute)
			st.Targets[0].ForeignVCLAt = &at
		}, code: 1, golden: "warning-foreign-vcl"},
		{name: "warning front door mostly unidentified", edit: func(st *api.Status) {
			st.FrontDoor = &api.FrontDoor{Direct: 10, Unidentified: 50}
		}, code: 1, golden: "warning-front-door"},
		{name: "ok front door unidentified under a busy minute", edit: func(st *api.Status) {
			st.FrontDoor = &api.FrontDoor{Unidentified: 59}
		}, code: 0, golden: "ok"},
		{name: "ok front door half unidentified", edit: func(st *api.Status) {
			st.FrontDoor = &api.FrontDoor{ProxyProtocol: 50, Unidentified: 50}
		}, code: 0, golden: "ok"},
		{name: "warning guest pages cannot listen", edit: func(st *api.Status) {
			st.GuestError = "cannot listen at profiles.guest_listen 127.0.0.1:6089 (bind: address already in use): heavy fetches guest pages from the backend until it can"
		}, code: 1, golden: "warning-guest-listen"},
		{name: "ok foreign vcl.use over an hour ago", edit: func(st *api.Status) {
			at := apitest.Now.Add(-61 * time.Minute)
			st.Targets[0].ForeignVCLAt = &at
		}, code: 0, golden: "ok"},
		{name: "warning label moved in label mode", edit: func(st *api.Status) {
			at := apitest.Now.Add(-30 * time.Second)
			st.VarnishMode, st.Targets[0].LabelVCL, st.Targets[0].ActiveVCL = "label", st.Targets[0].ActiveVCL, "reload_20261130_140000_77"
			st.Targets[0].ForeignVCLAt = &at
		}, code: 1, golden: "warning-foreign-label"},
		{name: "critical label mode out of sync", edit: func(st *api.Status) {
			st.VarnishMode, st.Targets[0].LabelVCL, st.Targets[0].ActiveVCL, st.Targets[0].InSync = "label", "", "boot", false
		}, code: 2, golden: "critical-label-missing"},
		{name: "critical stale sample", edit: func(st *api.Status) {
			st.Sample.Time = apitest.Now.Add(-95 * time.Second)
		}, code: 2, golden: "critical-stale"},
		{name: "critical no sample", edit: func(st *api.Status) {
			st.Sample = nil
		}, code: 2, golden: "critical-no-sample"},
		{name: "ok no sample yet just started", edit: func(st *api.Status) {
			st.Sample, st.UptimeSeconds, st.State, st.Reason = nil, 1, "light", "starting"
			st.Since = apitest.Now.Add(-time.Second)
			st.Targets[0].LastSwitchMS = 0
		}, code: 0, golden: "ok-starting"},
		{name: "critical varnish child stopped", edit: func(st *api.Status) {
			st.Targets = append(st.Targets, api.TargetStatus{Admin: "10.0.0.2:6082", Reachable: true, ActiveVCL: st.Targets[0].ActiveVCL, InSync: true, Child: "running"})
			st.Targets[0].Child = "stopped"
		}, code: 2, golden: "critical-child-stopped"},
		{name: "warning restarted", err: errRefused, opts: Options{Restart: true}, code: 1, golden: "warning-restarted"},
		{name: "restart left to systemd", err: errRefused, opts: Options{Restart: true}, setup: func(c *Checker, _ *fakeDaemon) {
			c.Systemd = func(context.Context) (bool, error) { return true, nil }
		}, code: 2, golden: "critical-systemd"},
		{name: "restart failed", err: errRefused, opts: Options{Restart: true}, setup: func(c *Checker, _ *fakeDaemon) {
			c.Start = func(context.Context) error {
				return errors.New("config /etc/gearshift/gearshift.yaml: cpus: must be 0 (detect) or a number of CPUs, got -1 (line 3)")
			}
		}, code: 2, golden: "critical-restart-failed"},
		{name: "unknown when the check hangs", err: errRefused, setup: func(c *Checker, _ *fakeDaemon) {
			c.Opts.Timeout = 20 * time.Millisecond
			c.Running = func() (int, error) { select {} }
		}, code: 3, golden: "unknown-timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{err: tc.err}
			if tc.err == nil {
				d.st = apitest.HealthyStatus()
				if tc.edit != nil {
					tc.edit(d.st)
				}
			}
			c := testChecker(t, d, tc.opts)
			if tc.setup != nil {
				tc.setup(c, d)
			}
			var out bytes.Buffer
			code := c.Run(context.Background(), &out)
			if code != tc.code {
				t.Errorf("exit code = %d, want %d; output %q", code, tc.code, out.String())
			}
			if n := strings.Count(out.String(), "\n"); n > 1 {
				t.Errorf("%d lines of output, want at most one", n)
			}
			golden.Check(t, "check/"+tc.golden+".golden", []byte(out.String()))
		})
	}
}

// Overlapping runs with --restart start the daemon once.
func TestCheckRestartLock(t *testing.T) {
	d := &fakeDaemon{err: errRefused}
	lock := filepath.Join(t.TempDir(), "check.lock")
	var inStart atomic.Int32
	slowStart := func(ctx context.Context) error {
		if inStart.Add(1) > 1 {
			t.Error("two checks started the daemon at once")
		}
		time.Sleep(50 * time.Millisecond) // a start takes a while; the other check waits on the lock
		inStart.Add(-1)
		return d.start(ctx)
	}
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := testChecker(t, d, Options{Restart: true})
			c.LockPath, c.Start = lock, slowStart
			codes[i] = c.Run(context.Background(), &bytes.Buffer{})
		}()
	}
	wg.Wait()
	if d.starts != 1 {
		t.Errorf("daemon started %d times, want once", d.starts)
	}
	warn := 0
	for _, c := range codes {
		if c == Warning {
			warn++
		} else if c != OK {
			t.Errorf("exit codes %v: want one WARNING (restarted) and OKs", codes)
		}
	}
	if warn != 1 {
		t.Errorf("exit codes %v: want exactly one WARNING (restarted)", codes)
	}
}

// The optional sources' signals are perfdata like the vitals, each in its
// unit, and only while available.
func TestPerfdataOfSources(t *testing.T) {
	st := apitest.HealthyStatus()
	for name, v := range map[string]float64{
		"client_rps": 410, "backend_fail_rps": 0.26, "queue_len": 3,
		"apache_busy_ratio": 0.5, "backend_ttfb_ms": 812.4, "injected": -2,
	} {
		st.Sample.Signals[name] = apitest.F64(v)
	}
	st.Sample.Signals["backend_rps"] = nil // configured, not readable now
	got := strings.Join(Perfdata(st, config.Default().ShownSignals(), apitest.Now, 30*time.Second), " ")
	for _, want := range []string{
		"'client_rps'=410;;;0 ", "'backend_fail_rps'=0.3;;;0 ", "'queue_len'=3;;;0 ",
		"'apache_busy_ratio'=0.5;;;0;1 ", "'backend_ttfb_ms'=812ms;;;0 ", "'injected'=-2;;; ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("perfdata lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "backend_rps'") || strings.Contains(got, "dropped_rps") {
		t.Errorf("perfdata has signals that are unavailable:\n%s", got)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/profiles"
)

var checkNow = time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC)

func opsF64(v float64) *float64 { return &v }

// healthyStatus is a daemon in moderate, in sync, with a fresh sample.
func healthyStatus() *controller.Status {
	return &controller.Status{
		Version: "0.1.0", State: "moderate", Mode: "auto",
		Since:       checkNow.Add(-12*time.Minute - 3*time.Second),
		Reason:      "load_per_cpu 0.82 >= 0.70 for 3 samples",
		Transitions: 4,
		Sample: &controller.SampleStatus{
			Time: checkNow.Add(-400 * time.Millisecond), Load1: 1.64, Load5: 1.2, Load15: 0.9, Runnable: 2,
			CPUs: 2, Signals: map[string]*float64{
				"load_per_cpu": opsF64(0.82), "mem_available_pct": opsF64(41.3), "psi_cpu": opsF64(12.5), "psi_mem": opsF64(0),
			},
		},
		Targets: []controller.TargetStatus{{
			Admin: "127.0.0.1:6082", Reachable: true, ActiveVCL: "gearshift-moderate-1a2b3c4d", InSync: true, LastSwitchMS: 0.41,
		}},
		UptimeSeconds: 3600,
	}
}

// fakeDaemon answers Status with st, or err; after started it answers st.
type fakeDaemon struct {
	mu      sync.Mutex
	st      *controller.Status
	err     error
	block   bool // never answer: honour ctx only
	started bool
	starts  int
}

func (f *fakeDaemon) Status(ctx context.Context) (*controller.Status, error) {
	f.mu.Lock()
	st, err, block := f.st, f.err, f.block
	if f.started {
		st, err = healthyStatus(), nil
	}
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, fmt.Errorf("%w on /run/x.sock: %v", controller.ErrUnreachable, ctx.Err())
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

func testChecker(tb testing.TB, d *fakeDaemon, o checkOptions) *checker {
	tb.Helper()
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	if o.maxAge == 0 {
		o.maxAge = 30 * time.Second
	}
	cfg := profiles.Default()
	return &checker{
		opts:      o,
		cfg:       cfg,
		cfgPath:   "/etc/gearshift/gearshift.yaml",
		client:    d,
		now:       func() time.Time { return checkNow },
		running:   func() (int, error) { return 0, nil },
		start:     d.start,
		systemd:   func(context.Context) (bool, error) { return false, nil },
		lockPath:  filepath.Join(tb.TempDir(), "check.lock"),
		startWait: time.Second,
		margin:    50 * time.Millisecond,
	}
}

var errRefused = fmt.Errorf("%w on /run/gearshift/gearshift.sock: connect: no such file or directory", controller.ErrUnreachable)

func TestCheckGolden(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(st *controller.Status)
		err    error
		opts   checkOptions
		setup  func(c *checker, d *fakeDaemon)
		code   int
		golden string
	}{
		{name: "ok", code: 0, golden: "ok"},
		{name: "ok quiet prints nothing", opts: checkOptions{quiet: true}, code: 0, golden: "ok-quiet"},
		{name: "forced without --warn-forced", edit: func(st *controller.Status) {
			st.Mode, st.State, st.Reason = "forced", "heavy", "forced by operator until 15:34"
			u := checkNow.Add(30 * time.Minute)
			st.ForcedUntil = &u
		}, code: 0, golden: "ok-forced"},
		{name: "warning forced", edit: func(st *controller.Status) {
			st.Mode, st.State, st.Reason = "forced", "heavy", "forced by operator until 15:34"
			u := checkNow.Add(30 * time.Minute)
			st.ForcedUntil = &u
		}, opts: checkOptions{warnForced: true}, code: 1, golden: "warning-forced"},
		{name: "warning forced until auto", edit: func(st *controller.Status) {
			st.Mode, st.State, st.Reason = "forced", "light", "forced by operator"
		}, opts: checkOptions{warnForced: true}, code: 1, golden: "warning-forced-until-auto"},
		{name: "warning state", edit: func(st *controller.Status) {
			st.State, st.Reason = "heavy", "load_per_cpu 1.82 >= 1.50 for 3 samples"
			st.Sample.Signals["load_per_cpu"] = opsF64(1.82)
		}, opts: checkOptions{warnStates: []string{"moderate", "heavy"}}, code: 1, golden: "warning-state"},
		{name: "warning multi-line config error on one line", edit: func(st *controller.Status) {
			st.ConfigError = "config /etc/gearshift/gearshift.yaml has 2 problems:\ncpus: must be 0 (detect) or a number of CPUs, got -1 (line 3)\nprofiles.never_cache[0]: \"a|b\" is odd"
		}, code: 1, golden: "warning-config-multiline"},
		{name: "warning config reload failed", edit: func(st *controller.Status) {
			st.ConfigError = "config /etc/gearshift/gearshift.yaml: on_exit: must be one of keep, light, moderate, heavy, got \"stop\""
		}, code: 1, golden: "warning-config"},
		{name: "warning config file invalid", setup: func(c *checker, _ *fakeDaemon) {
			c.cfgErr = &profiles.Error{File: c.cfgPath, Problems: []profiles.Problem{{Path: "cpus", Msg: "must be 0 (detect) or a number of CPUs, got -1", Line: 3}, {Path: "on_exit", Msg: "x"}}}
		}, code: 1, golden: "warning-config-file"},
		{name: "critical not running", err: errRefused, code: 2, golden: "critical-not-running"},
		{name: "critical running but refusing", err: errRefused, setup: func(c *checker, _ *fakeDaemon) {
			c.running = func() (int, error) { return 4242, nil }
		}, code: 2, golden: "critical-not-answering"},
		{name: "critical silent", setup: func(c *checker, d *fakeDaemon) {
			d.block = true
			c.opts.timeout = 20 * time.Millisecond
		}, code: 2, golden: "critical-silent"},
		{name: "critical target unreachable", edit: func(st *controller.Status) {
			st.Targets[0].Reachable, st.Targets[0].InSync, st.Targets[0].ActiveVCL = false, false, ""
			st.Targets[0].Error = "dial tcp 127.0.0.1:6082: connect: connection refused"
		}, code: 2, golden: "critical-target-unreachable"},
		{name: "critical target out of sync and config warning", edit: func(st *controller.Status) {
			st.Targets = append(st.Targets, controller.TargetStatus{Admin: "10.0.0.2:6082", Reachable: true, ActiveVCL: "boot", LastSwitchMS: 1.5})
			st.ConfigError = "varnish refused the heavy profile"
		}, code: 2, golden: "critical-out-of-sync"},
		{name: "critical stale sample", edit: func(st *controller.Status) {
			st.Sample.Time = checkNow.Add(-95 * time.Second)
		}, code: 2, golden: "critical-stale"},
		{name: "critical no sample", edit: func(st *controller.Status) {
			st.Sample = nil
		}, code: 2, golden: "critical-no-sample"},
		{name: "ok no sample yet just started", edit: func(st *controller.Status) {
			st.Sample, st.UptimeSeconds, st.State, st.Reason = nil, 1, "light", "starting"
			st.Since = checkNow.Add(-time.Second)
		}, code: 0, golden: "ok-starting"},
		{name: "warning restarted", err: errRefused, opts: checkOptions{restart: true}, code: 1, golden: "warning-restarted"},
		{name: "restart left to systemd", err: errRefused, opts: checkOptions{restart: true}, setup: func(c *checker, _ *fakeDaemon) {
			c.systemd = func(context.Context) (bool, error) { return true, nil }
		}, code: 2, golden: "critical-systemd"},
		{name: "restart failed", err: errRefused, opts: checkOptions{restart: true}, setup: func(c *checker, _ *fakeDaemon) {
			c.start = func(context.Context) error {
				return errors.New("config /etc/gearshift/gearshift.yaml: cpus: must be 0 (detect) or a number of CPUs, got -1 (line 3)")
			}
		}, code: 2, golden: "critical-restart-failed"},
		{name: "unknown when the check hangs", err: errRefused, setup: func(c *checker, _ *fakeDaemon) {
			c.opts.timeout = 20 * time.Millisecond
			c.running = func() (int, error) { select {} }
		}, code: 3, golden: "unknown-timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeDaemon{err: tc.err}
			if tc.err == nil {
				d.st = healthyStatus()
				if tc.edit != nil {
					tc.edit(d.st)
				}
			}
			c := testChecker(t, d, tc.opts)
			if tc.setup != nil {
				tc.setup(c, d)
			}
			var out bytes.Buffer
			code := c.run(context.Background(), &out)
			if code != tc.code {
				t.Errorf("exit code = %d, want %d; output %q", code, tc.code, out.String())
			}
			if n := strings.Count(out.String(), "\n"); n > 1 {
				t.Errorf("%d lines of output, want at most one", n)
			}
			opsGolden(t, "check/"+tc.golden+".golden", out.String())
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
			c := testChecker(t, d, checkOptions{restart: true})
			c.lockPath, c.start = lock, slowStart
			codes[i] = c.run(context.Background(), &bytes.Buffer{})
		}()
	}
	wg.Wait()
	if d.starts != 1 {
		t.Errorf("daemon started %d times, want once", d.starts)
	}
	warn := 0
	for _, c := range codes {
		if c == checkWarning {
			warn++
		} else if c != checkOK {
			t.Errorf("exit codes %v: want one WARNING (restarted) and OKs", codes)
		}
	}
	if warn != 1 {
		t.Errorf("exit codes %v: want exactly one WARNING (restarted)", codes)
	}
}

// serveStatus serves canned /v1/status JSON on a unix socket in dir.
func serveStatus(tb testing.TB, socket string, st *controller.Status) {
	tb.Helper()
	l, err := net.Listen("unix", socket)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": "no such endpoint"})
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	srv.Listener = l
	srv.Start()
	tb.Cleanup(srv.Close)
}

// The command end to end, in process: config → socket → line and exit code.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("x\n"), 0o600)
	socket := filepath.Join(dir, "gs.sock")
	cfgPath := filepath.Join(dir, "gearshift.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: %s } ] }\ncontrol: { socket: %s }\npid_file: %s/gs.pid\n", secret, socket, dir)), 0o644)

	code, stdout, _ := runMain(t, "check", "--config", cfgPath)
	if code != 2 || !strings.HasPrefix(stdout, "GEARSHIFT CRITICAL - daemon not running (no answer on "+socket) {
		t.Errorf("no daemon: exit %d, %q", code, stdout)
	}

	st := healthyStatus()
	st.Since = time.Now().Add(-time.Minute)
	st.Sample.Time = time.Now()
	serveStatus(t, socket, st)
	code, stdout, stderr := runMain(t, "check", "--config", cfgPath)
	if code != 0 || !strings.HasPrefix(stdout, "GEARSHIFT OK - gear moderate (auto, 1m): load_per_cpu 0.82 >= 0.70 for 3 samples | 'load_per_cpu'=0.82;;;0 'mem_available'=41.3%;;;0;100 'psi_cpu'=12.5%;;;0;100 'psi_mem'=0%;;;0;100 'state'=1;;;0;2 'switch_ms'=0.41ms;;;0 'sample_age'=") {
		t.Errorf("daemon up: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runMain(t, "check", "--config", cfgPath, "--quiet")
	if code != 0 || stdout != "" {
		t.Errorf("--quiet when OK: exit %d, %q", code, stdout)
	}
	code, stdout, _ = runMain(t, "check", "--config", cfgPath, "--warn-state", "light", "--warn-state", "moderate")
	if code != 1 || !strings.HasPrefix(stdout, "GEARSHIFT WARNING - gear is moderate; gear moderate (auto") {
		t.Errorf("--warn-state: exit %d, %q", code, stdout)
	}

	// A monitoring agent may not read the admin secret: not the check's business.
	noSecret := filepath.Join(dir, "no-secret.yaml")
	os.WriteFile(noSecret, []byte(fmt.Sprintf("varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: %s/absent } ] }\ncontrol: { socket: %s }\n", dir, socket)), 0o644)
	if code, stdout, _ := runMain(t, "check", "--config", noSecret); code != 0 {
		t.Errorf("unreadable secret: exit %d, %q; want OK", code, stdout)
	}
	// A file edited into something the next start would refuse: WARNING.
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte(fmt.Sprintf("control: { socket: %s }\ncpus: -1\n", socket)), 0o644)
	want := "GEARSHIFT WARNING - config " + broken + " does not validate, the next start or reload will fail: cpus: must be 0 (detect) or a number of CPUs, got -1 (line 2); gear moderate"
	if code, stdout, _ := runMain(t, "check", "--config", broken); code != 1 || !strings.HasPrefix(stdout, want) {
		t.Errorf("invalid config file: exit %d,\n%s\nwant\n%s", code, stdout, want)
	}
}

func TestCheckBadFlagsAreUnknown(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--timeout", "soon"},
		{"check", "--nope"},
		{"check", "--warn-state", "turbo"},
		{"check", "--timeout", "0s"},
		{"check", "extra"},
	} {
		code, stdout, stderr := runMain(t, args...)
		if code != 3 {
			t.Errorf("%q: exit %d, want 3 (UNKNOWN); stdout %q stderr %q", args, code, stdout, stderr)
		}
		if !strings.HasPrefix(stdout, "GEARSHIFT UNKNOWN - ") || stderr != "" {
			t.Errorf("%q: output %q %q, want a GEARSHIFT UNKNOWN line", args, stdout, stderr)
		}
	}
}

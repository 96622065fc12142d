package system

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// Tests in this file drive the built binary against a real varnishd, as an
// operator would.

// runningDaemon is a `gearshift run` started by a test.
type runningDaemon struct {
	t          testing.TB
	cmd        *exec.Cmd
	configPath string
	cfg        *config.Config
	v          *varnishtest.Varnish
	out        *lockedBuffer
	exited     chan struct{}
	exitErr    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// quietThresholds keeps the real sensor of a busy test machine from moving
// the gear: only force does, and a released force steps down quickly.
func quietThresholds(cfg *config.Config) {
	cfg.States.Moderate = config.Band{Enter: config.Rule{"load_per_cpu": 1000}, Stay: config.Rule{"load_per_cpu": 900}}
	cfg.States.Heavy = config.Band{Enter: config.Rule{"load_per_cpu": 2000}, Stay: config.Rule{"load_per_cpu": 1900}}
	cfg.Hysteresis.MinDwell = timefmt.Duration(time.Second)
	cfg.Hysteresis.DownWindow = timefmt.Duration(time.Second)
}

// backend starts an origin for Varnish; it counts the requests it answers.
func backend(t *testing.T) (*httptest.Server, *atomic.Int64, profiles.Backend) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return srv, &hits, profiles.BackendAt(host, p)
}

func startDaemon(t *testing.T, edit func(*config.Config)) *runningDaemon {
	t.Helper()
	return startDaemonEnv(t, edit, "NOTIFY_SOCKET=")
}

// startDaemonEnv is startDaemon with extra environment variables.
func startDaemonEnv(t *testing.T, edit func(*config.Config), env ...string) *runningDaemon {
	t.Helper()
	return startDaemonOn(t, varnishtest.Start(t, varnishtest.Config{}), edit, env...)
}

// startDaemonOn is startDaemonEnv driving an already running varnishd.
func startDaemonOn(t *testing.T, v *varnishtest.Varnish, edit func(*config.Config), env ...string) *runningDaemon {
	t.Helper()
	d := launchDaemonOn(t, v, edit, env...)
	d.eventually("daemon in sync on light", 90*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		return inSync(s, "light")
	})
	return d
}

// launchDaemon starts `gearshift run` as startDaemonEnv does, without
// waiting for anything.
func launchDaemon(t *testing.T, edit func(*config.Config), env ...string) *runningDaemon {
	t.Helper()
	return launchDaemonOn(t, varnishtest.Start(t, varnishtest.Config{}), edit, env...)
}

// launchDaemonOn is launchDaemon driving an already running varnishd.
func launchDaemonOn(t *testing.T, v *varnishtest.Varnish, edit func(*config.Config), env ...string) *runningDaemon {
	t.Helper()
	_, _, be := backend(t)
	path, cfg := configtest.ForVarnish(t, v, func(cfg *config.Config) {
		cfg.Backend = be
		quietThresholds(cfg)
		if edit != nil {
			edit(cfg)
		}
	})
	d := spawnDaemon(t, v, path, env...)
	d.cfg = cfg
	t.Cleanup(func() {
		if d.running() {
			d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("gearshift output:\n%s", d.out)
		}
	})
	return d
}

// spawnDaemon starts `gearshift run --config path` driving v, its output
// kept in d.out; the caller stops it.
func spawnDaemon(t testing.TB, v *varnishtest.Varnish, path string, env ...string) *runningDaemon {
	t.Helper()
	d := &runningDaemon{t: t, configPath: path, v: v, out: &lockedBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(gearshiftBin, "run", "--config", path)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.Env = append(os.Environ(), env...)
	testenv.DiesWithTest(d.cmd)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exitErr = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		// The race detector reports on stderr and lets the daemon run on.
		if strings.Contains(d.out.String(), "WARNING: DATA RACE") {
			t.Errorf("the daemon raced:\n%s", d.out)
		}
	})
	return d
}

func (d *runningDaemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// gs runs the binary with the daemon's config and returns its output and exit code.
func (d *runningDaemon) gs(args ...string) (stdout, stderr string, code int) {
	d.t.Helper()
	return runGearshift(d.t, append(args, "--config", d.configPath)...)
}

// runGearshift runs the built binary with args and returns its output and
// exit code. It never inherits the test runner's NOTIFY_SOCKET.
func runGearshift(tb testing.TB, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(gearshiftBin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		tb.Fatal(err)
	}
	return o.String(), e.String(), code
}

func (d *runningDaemon) status() (*api.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return api.NewClient(d.cfg.Control.Socket).Status(ctx)
}

func (d *runningDaemon) eventually(what string, timeout time.Duration, cond func() error) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if !d.running() {
			d.t.Fatalf("%s: gearshift exited (%v)", what, d.exitErr)
		}
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func inSync(s *api.Status, gear string) error {
	if s.State != gear {
		return fmt.Errorf("state %s, want %s", s.State, gear)
	}
	for _, t := range s.Targets {
		if !t.InSync || !strings.HasPrefix(t.ActiveVCL, "gearshift-"+gear+"-") {
			return fmt.Errorf("target %+v not in sync on %s", t, gear)
		}
	}
	return nil
}

// activeVCL asks varnishd itself.
func activeVCL(t *testing.T, v *varnishtest.Varnish) string {
	t.Helper()
	out, err := v.Adm("vcl.list")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "active" {
			return f[len(f)-1]
		}
	}
	t.Fatalf("no active VCL in:\n%s", out)
	return ""
}

func profileHeader(t *testing.T, v *varnishtest.Varnish) string {
	t.Helper()
	resp, err := http.Get(v.URL("/index.html"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET through varnish: %s", resp.Status)
	}
	return resp.Header.Get("X-Gearshift-Profile")
}

func TestE2E(t *testing.T) {
	d := startDaemon(t, nil)
	v := d.v

	t.Run("status", func(t *testing.T) {
		out, errOut, code := d.gs("status")
		if code != 0 || !strings.Contains(out, "LIGHT") || !strings.Contains(out, v.AdminAddr+"  in sync") {
			t.Fatalf("status: code %d\n%s%s", code, out, errOut)
		}
		out, _, code = d.gs("status", "--json")
		var s api.Status
		if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil {
			t.Fatalf("status --json: code %d, %v\n%s", code, err, out)
		}
		if s.Version != controller.Version || s.Mode != "auto" || s.Sample == nil || s.Sample.CPUs < 1 || len(s.Targets) != 1 {
			t.Errorf("status --json = %+v", s)
		}
		var raw map[string]any
		json.Unmarshal([]byte(out), &raw)
		for _, k := range []string{"version", "state", "mode", "forced_until", "since", "reason", "transitions", "sample", "targets", "config_error", "uptime_seconds"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("status --json lacks %q", k)
			}
		}
	})

	t.Run("force each gear", func(t *testing.T) {
		for _, gear := range []string{"heavy", "moderate", "light", "heavy"} {
			out, errOut, code := d.gs("force", gear)
			if code != 0 || !strings.Contains(out, "gear "+gear+", forced") {
				t.Fatalf("force %s: code %d\n%s%s", gear, code, out, errOut)
			}
			if a := activeVCL(t, v); !strings.HasPrefix(a, "gearshift-"+gear+"-") {
				t.Errorf("after force %s varnish runs %s", gear, a)
			}
			if h := profileHeader(t, v); h != gear {
				t.Errorf("after force %s: X-Gearshift-Profile %q", gear, h)
			}
		}
		_, errOut, code := d.gs("force", "turbo")
		if code != 2 || !strings.Contains(errOut, "turbo") {
			t.Errorf("force turbo: code %d, %s", code, errOut)
		}
		_, errOut, code = d.gs("force", "heavy", "--for", "-5m")
		if code != 2 || !strings.Contains(errOut, "negative") {
			t.Errorf("force --for -5m: code %d, %s", code, errOut)
		}
	})

	t.Run("force expires", func(t *testing.T) {
		out, _, code := d.gs("force", "heavy", "--for", "2s")
		if code != 0 || !strings.Contains(out, "forced until") {
			t.Fatalf("force --for: code %d\n%s", code, out)
		}
		s, _ := d.status()
		if s == nil || s.Mode != "forced" || s.ForcedUntil == nil {
			t.Fatalf("status while forced = %+v", s)
		}
		// Released in heavy; quiet load steps it down one gear at a time.
		d.eventually("force expired and back to light", 30*time.Second, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			if s.Mode != "auto" {
				return fmt.Errorf("mode %s", s.Mode)
			}
			return inSync(s, "light")
		})
		if h := profileHeader(t, v); h != "light" {
			t.Errorf("X-Gearshift-Profile %q after expiry", h)
		}
	})

	t.Run("auto", func(t *testing.T) {
		d.gs("force", "moderate")
		out, errOut, code := d.gs("auto")
		if code != 0 || !strings.Contains(out, "auto") {
			t.Fatalf("auto: code %d\n%s%s", code, out, errOut)
		}
		if s, _ := d.status(); s == nil || s.Mode != "auto" {
			t.Fatalf("mode after auto: %+v", s)
		}
		// Released in moderate; the next test starts from light.
		d.eventually("back to light after auto", 30*time.Second, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			return inSync(s, "light")
		})
	})

	t.Run("broken reload keeps the old config", func(t *testing.T) {
		good, err := os.ReadFile(d.configPath)
		if err != nil {
			t.Fatal(err)
		}
		before := activeVCL(t, v)
		os.WriteFile(d.configPath, append(append([]byte{}, good...), "no_such_key: 1\n"...), 0o644)
		d.cmd.Process.Signal(syscall.SIGHUP)
		d.eventually("config_error set", 30*time.Second, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			if !strings.Contains(s.ConfigError, "no_such_key") {
				return fmt.Errorf("config_error %q", s.ConfigError)
			}
			return nil
		})
		if a := activeVCL(t, v); a != before {
			t.Errorf("active VCL %s after a broken reload, was %s", a, before)
		}
		out, _, _ := d.gs("status")
		if !strings.Contains(out, "RELOAD FAILED") {
			t.Errorf("human status does not show the failed reload:\n%s", out)
		}

		// A good reload clears it, and a changed profile gets a new name.
		var cfg config.Config
		yaml.Unmarshal(good, &cfg)
		cfg.Profiles.StaticTTL = timefmt.Duration(2 * time.Hour)
		b, _ := yaml.Marshal(&cfg)
		os.WriteFile(d.configPath, b, 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := api.NewClient(d.cfg.Control.Socket).Reload(ctx)
		if err != nil || s.ConfigError != "" {
			t.Fatalf("good reload: %+v, %v", s, err)
		}
		if a := activeVCL(t, v); a == before || !strings.HasPrefix(a, "gearshift-light-") {
			t.Errorf("active VCL %s after a reload with new TTLs, was %s", a, before)
		}
		// Varnish lists a discarded VCL as "discarded" while a client
		// connection still holds it (the one that was active until now).
		out, _ = v.Adm("vcl.list")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, before) && !strings.HasPrefix(line, "discarded") {
				t.Errorf("old profile %s not discarded:\n%s", before, out)
			}
		}
	})

	t.Run("varnish killed and restarted", func(t *testing.T) {
		v.Kill()
		d.eventually("target unreachable", 30*time.Second, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			if s.Targets[0].Reachable || s.Targets[0].Error == "" {
				return fmt.Errorf("target %+v", s.Targets[0])
			}
			return nil
		})
		out, _, code := d.gs("status")
		if code != 0 || !strings.Contains(out, "UNREACHABLE") {
			t.Errorf("status with varnish down: code %d\n%s", code, out)
		}
		v.Restart()
		d.eventually("back in sync", 60*time.Second, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			return inSync(s, "light")
		})
		if h := profileHeader(t, v); h != "light" {
			t.Errorf("X-Gearshift-Profile %q after the restart", h)
		}
	})

	t.Run("log", func(t *testing.T) {
		b, err := os.ReadFile(d.cfg.Log.File)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, bytes.TrimSpace(v.Secret)) || strings.Contains(d.out.String(), strings.TrimSpace(string(v.Secret))) {
			t.Fatal("the admin secret is in the log")
		}
		var changes, reachable int
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var e map[string]any
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatalf("log line is not JSON: %s", line)
			}
			for _, k := range []string{"ts", "level", "msg"} {
				if _, ok := e[k]; !ok {
					t.Errorf("log line without %s: %s", k, line)
				}
			}
			switch e["msg"] {
			case "state change":
				changes++
				for _, k := range []string{"from", "to", "reason", "load_per_cpu", "mem_available_pct"} {
					if _, ok := e[k]; !ok {
						t.Errorf("state change without %s: %s", k, line)
					}
				}
			case "varnish reachable again":
				reachable++
			}
		}
		if changes < 5 || reachable != 1 {
			t.Errorf("%d state changes and %d recoveries logged", changes, reachable)
		}
	})

	t.Run("SIGUSR1 reopens the log", func(t *testing.T) {
		rotated := d.cfg.Log.File + ".1"
		if err := os.Rename(d.cfg.Log.File, rotated); err != nil {
			t.Fatal(err)
		}
		d.cmd.Process.Signal(syscall.SIGUSR1)
		d.eventually("log file reopened", 10*time.Second, func() error {
			b, err := os.ReadFile(d.cfg.Log.File)
			if err != nil || !bytes.Contains(b, []byte("log file reopened")) {
				return fmt.Errorf("new log: %q, %v", b, err)
			}
			return nil
		})
	})

	t.Run("SIGTERM stops cleanly", func(t *testing.T) {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			t.Fatal("gearshift did not stop within 20s of SIGTERM")
		}
		if d.exitErr != nil {
			t.Fatalf("exit: %v\n%s", d.exitErr, d.out)
		}
		for _, f := range []string{d.cfg.Control.Socket, d.cfg.PIDFile} {
			if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind: %v", f, err)
			}
		}
		_, errOut, code := d.gs("status")
		if code != 1 || !strings.Contains(errOut, d.cfg.Control.Socket) {
			t.Errorf("status of a stopped daemon: code %d, %s", code, errOut)
		}
	})
}

// TestE2ESwitchUnderLoad switches gears while clients hammer Varnish: not
// one request may fail.
func TestE2ESwitchUnderLoad(t *testing.T) {
	d := startDaemon(t, nil)
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(d.v.URL(fmt.Sprintf("/page/%d/%d", i, n%50)))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %s", resp.Status)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				ok.Add(1)
			}
		}(i)
	}
	for _, gear := range []string{"heavy", "light", "moderate", "heavy", "moderate", "light"} {
		if out, errOut, code := d.gs("force", gear); code != 0 {
			t.Errorf("force %s: %d %s%s", gear, code, out, errOut)
		}
		time.Sleep(200 * time.Millisecond) // let requests run on each gear
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || ok.Load() < 100 {
		t.Fatalf("%d requests ok, %d failed (first: %v)", ok.Load(), failed.Load(), firstErr.Load())
	}
	t.Logf("%d requests across 6 switches, none lost", ok.Load())
}

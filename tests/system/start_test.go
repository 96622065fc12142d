package system

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/pidfile"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// opsRun runs the built gearshift with args and returns its exit code and output.
func opsRun(tb testing.TB, args ...string) (code int, stdout, stderr string) {
	tb.Helper()
	stdout, stderr, code = runGearshift(tb, args...)
	return code, stdout, stderr
}

// opsKillDaemon kills whatever daemon the pid file names, for a test's cleanup.
func opsKillDaemon(pidFile string) {
	if pid, err := pidfile.Running(pidFile); err == nil && pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// The daemon's life cycle as an operator (and cron) drives it, against a
// real varnishd: start → check OK → stop → check CRITICAL → check --restart
// → WARNING restarted → reload → stop.
func TestStartCheckStopRoundTrip(t *testing.T) {
	v := varnishtest.Start(t, varnishtest.Config{})
	path, cfg := configtest.ForVarnish(t, v, func(c *config.Config) {
		c.Hysteresis.UpConfirm = 1000 // stay in light whatever the machine's load
		// A runtime directory start has to create, shared with the pid file.
		run := filepath.Join(filepath.Dir(c.Control.Socket), "run")
		c.Control.Socket = filepath.Join(run, "gearshift.sock")
		c.PIDFile = filepath.Join(run, "gearshift.pid")
		if os.Geteuid() == 0 {
			c.Control.Group = "nogroup"
		}
	})
	t.Cleanup(func() {
		opsKillDaemon(cfg.PIDFile)
		if t.Failed() {
			b, _ := os.ReadFile(cfg.Log.File)
			t.Logf("daemon log:\n%s", b)
		}
	})
	gs := func(args ...string) (int, string, string) {
		t.Helper()
		return opsRun(t, append(args, "--config", path)...)
	}
	// eventuallyCheck waits for check to answer with the code wanted.
	eventuallyCheck := func(want int, args ...string) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, out, errOut := gs(append([]string{"check"}, args...)...)
			if code == want {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("check %v: exit %d, want %d: %s%s", args, code, want, out, errOut)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if code, out, errOut := gs("stop"); code != 0 || !strings.Contains(out, "not running") {
		t.Errorf("stop without a daemon: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := gs("reload"); code != 1 || !strings.Contains(errOut, "not running") {
		t.Errorf("reload without a daemon: exit %d, %q", code, errOut)
	}

	code, out, errOut := gs("start")
	if code != 0 || !strings.HasPrefix(out, "gearshift started (pid ") {
		t.Fatalf("start: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	pid, err := pidfile.Running(cfg.PIDFile)
	if err != nil || pid == 0 {
		t.Fatalf("no daemon in the pid file after start: %d, %v", pid, err)
	}
	// control.group must get through the directory start created.
	if fi, err := os.Stat(filepath.Dir(cfg.Control.Socket)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("socket directory: %v, %v; want 0755", fi.Mode(), err)
	}
	if fi, err := os.Stat(cfg.Control.Socket); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket: %v, %v; want 0660", fi.Mode(), err)
	} else if g, err := user.LookupGroup("nogroup"); err == nil && cfg.Control.Group != "" && strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Gid)) != g.Gid {
		t.Errorf("socket group %d, want nogroup (%s)", fi.Sys().(*syscall.Stat_t).Gid, g.Gid)
	}
	if code, _, errOut := gs("start"); code != 1 || !strings.Contains(errOut, "already running") {
		t.Errorf("second start: exit %d, stderr %q; want 1 and already running", code, errOut)
	}

	// start returns once the daemon is ready: `start && check` holds.
	code, out, errOut = gs("check")
	if code != 0 || !strings.HasPrefix(out, "GEARSHIFT OK - gear light (auto") || !strings.Contains(out, "'state'=0;;;0;2") {
		t.Errorf("check right after start: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := gs("check", "--quiet"); code != 0 || out != "" {
		t.Errorf("check --quiet: exit %d, %q", code, out)
	}

	if code, out, errOut := gs("reload"); code != 0 || !strings.HasPrefix(out, "gearshift reloaded (pid ") {
		t.Errorf("reload: exit %d, %q %q", code, out, errOut)
	}
	// A config Varnish refuses: reload waits for that and says why.
	cfgText, _ := os.ReadFile(path)
	broken := filepath.Join(filepath.Dir(path), "broken.vcl")
	os.WriteFile(broken, []byte("vcl 4.1;\nsub vcl_recv { this is not vcl }\n"), 0o644)
	bad := *cfg
	bad.Profiles.Heavy.VCLFile = broken
	badText, _ := bad.YAML()
	os.WriteFile(path, badText, 0o644)
	if code, out, errOut := gs("reload"); code != 1 || !strings.Contains(errOut, "refused the new config") || !strings.Contains(errOut, "VCL") {
		t.Errorf("reload of a VCL Varnish refuses: exit %d, %q %q; want 1 and the reason", code, out, errOut)
	}
	os.WriteFile(path, cfgText, 0o644)
	// reload answered once the daemon had reloaded: the log says so already.
	if code, out, errOut := gs("logs", "-n", "0", "--json"); code != 0 || !strings.Contains(out, `"config reloaded"`) {
		t.Errorf("logs after reload: exit %d, %q %q", code, out, errOut)
	}

	if code, out, errOut := gs("stop", "--timeout", "60s"); code != 0 || !strings.Contains(out, "gearshift stopped") {
		t.Fatalf("stop: exit %d, %q %q", code, out, errOut)
	}
	if pidfile.Alive(pid) {
		t.Errorf("pid %d still alive after stop", pid)
	}
	if code, out, _ := gs("check"); code != 2 || !strings.HasPrefix(out, "GEARSHIFT CRITICAL - daemon not running") {
		t.Errorf("check after stop: exit %d, %q", code, out)
	}

	code, out, errOut = gs("check", "--restart", "--timeout", "30s")
	if code != 1 || !strings.HasPrefix(out, "GEARSHIFT WARNING - restarted") {
		t.Fatalf("check --restart: exit %d, %q %q", code, out, errOut)
	}
	if p, _ := pidfile.Running(cfg.PIDFile); p == 0 || p == pid {
		t.Errorf("after check --restart the pid file names %d (old daemon %d)", p, pid)
	}
	eventuallyCheck(0)
	if code, out, errOut := gs("stop", "--timeout", "60s"); code != 0 {
		t.Fatalf("stop: exit %d, %q %q", code, out, errOut)
	}
}

// start refuses a config that does not validate, before detaching.
func TestStartBadConfig(t *testing.T) {
	path, _ := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\ncpus: -1\n")
	code, out, errOut := opsRun(t, "start", "--config", path)
	if code != 2 || out != "" || !strings.Contains(errOut, "cpus: must be 0") {
		t.Errorf("start with a bad config: exit %d, %q %q", code, out, errOut)
	}
}

// Under systemd, start points at the unit instead of detaching from it.
func TestStartUnderSystemd(t *testing.T) {
	path, _ := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n")
	cmd := exec.Command(gearshiftBin, "start", "--config", path)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=/run/systemd/notify")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "gearshift run") {
		t.Errorf("start under systemd: %v, %s", err, out)
	}
}

// When the daemon dies while starting, start says why, from the log.
func TestStartDaemonExits(t *testing.T) {
	path, dir := configtest.File(t, `varnish: { targets: [ { admin: "127.0.0.1:1", secret_file: $DIR/secret } ] }
control: { socket: $DIR/gs.sock }
pid_file: $DIR/gs.pid
log: { file: $DIR/gs.log }
history: { dir: $DIR/history }
`)
	// An earlier run's error must not be taken for this one's.
	os.WriteFile(dir+"/gs.log", []byte(`{"level":"error","ts":"2026-11-30T15:00:00Z","msg":"an old error"}`+"\n"), 0o640)
	if err := os.Mkdir(dir+"/gs.sock", 0o755); err != nil { // in the way of the socket
		t.Fatal(err)
	}
	code, stdout, stderr := opsRun(t, "start", "--config", path, "--wait", "20s")
	const want = "gearshift: the daemon exited during start (exit status 1); its log says: "
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, dir+"/gs.sock") || strings.Contains(stderr, "an old error") {
		t.Errorf("start: exit %d, stdout %q, stderr\n%s\nwant %q and the socket named", code, stdout, stderr, want)
	}
}

// check follows Varnish going away and coming back, with the daemon alive.
func TestCheckFollowsVarnish(t *testing.T) {
	v := varnishtest.Start(t, varnishtest.Config{})
	path, cfg := configtest.ForVarnish(t, v, func(c *config.Config) { c.Hysteresis.UpConfirm = 1000 })
	t.Cleanup(func() { opsKillDaemon(cfg.PIDFile) })
	if code, out, errOut := opsRun(t, "start", "--config", path); code != 0 {
		t.Fatalf("start: exit %d, %q %q", code, out, errOut)
	}
	waitCheck := func(want int, contains string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, out, _ := opsRun(t, "check", "--config", path)
			if code == want && strings.Contains(out, contains) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("check: exit %d, %q; want %d and %q", code, out, want, contains)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitCheck(0, "GEARSHIFT OK - gear light")
	v.Kill()
	waitCheck(2, "GEARSHIFT CRITICAL - target "+v.AdminAddr+" unreachable")
	v.Restart()
	waitCheck(0, "GEARSHIFT OK - gear light")
	if code, out, errOut := opsRun(t, "stop", "--config", path, "--timeout", "60s"); code != 0 {
		t.Errorf("stop: exit %d, %q %q", code, out, errOut)
	}
}

// waitLogged waits until the log at path has an entry with message msg.
func waitLogged(tb testing.TB, path, msg string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	found := errors.New("found")
	err := logging.Follow(ctx, path, 0, 20*time.Millisecond, func(line []byte) {
		if e, ok := logging.ParseEntry(line); ok && e.Str("msg") == msg {
			cancel()
			found = nil
		}
	})
	if found != nil {
		tb.Fatalf("no %q entry in %s: %v", msg, path, err)
	}
}

// A pid file with garbage, or naming a live gearshift process that is not
// the daemon (a `logs -f`), is stale: only a daemon holds it locked. stop
// says not running and signals nothing, check --restart restarts, start
// starts.
func TestStalePidFileIsNotTheDaemon(t *testing.T) {
	v := varnishtest.Start(t, varnishtest.Config{})
	path, cfg := configtest.ForVarnish(t, v, func(c *config.Config) {
		c.Hysteresis.UpConfirm = 1000
		if os.Geteuid() == 0 {
			c.Control.Group = "nogroup"
		}
	})
	t.Cleanup(func() {
		opsKillDaemon(cfg.PIDFile)
		if t.Failed() {
			b, _ := os.ReadFile(cfg.Log.File)
			t.Logf("daemon log:\n%s", b)
		}
	})
	gs := func(args ...string) (int, string, string) {
		t.Helper()
		return opsRun(t, append(args, "--config", path)...)
	}
	os.WriteFile(cfg.Log.File, nil, 0o640)
	logs := exec.Command(gearshiftBin, "logs", "-f", "--config", path)
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { logs.Process.Kill(); logs.Wait() }()

	for _, tc := range []struct{ name, text string }{
		{"garbage", "\x00\x7fnot a pid\n"},
		{"a live gearshift logs -f", strconv.Itoa(logs.Process.Pid) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stale := func() {
				t.Helper()
				if err := os.WriteFile(cfg.PIDFile, []byte(tc.text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stale()
			if code, out, errOut := gs("stop"); code != 0 || !strings.Contains(out, "not running") {
				t.Errorf("stop: exit %d, %q %q; want 0 and not running", code, out, errOut)
			}
			if code, out, errOut := gs("check", "--restart", "--timeout", "30s"); code != 1 || !strings.HasPrefix(out, "GEARSHIFT WARNING - restarted") {
				t.Fatalf("check --restart: exit %d, %q %q; want the daemon restarted", code, out, errOut)
			}
			if code, out, errOut := gs("stop", "--timeout", "60s"); code != 0 || !strings.Contains(out, "gearshift stopped") {
				t.Fatalf("stop: exit %d, %q %q", code, out, errOut)
			}
			stale()
			if code, out, errOut := gs("start"); code != 0 || !strings.HasPrefix(out, "gearshift started (pid ") {
				t.Fatalf("start: exit %d, %q %q", code, out, errOut)
			}
			pid, err := pidfile.Running(cfg.PIDFile)
			if err != nil || pid == 0 || pid == logs.Process.Pid {
				t.Errorf("after start the pid file names %d, %v", pid, err)
			}
			if code, out, errOut := gs("stop", "--timeout", "60s"); code != 0 || !strings.Contains(out, "gearshift stopped") {
				t.Fatalf("stop: exit %d, %q %q", code, out, errOut)
			}
			if !pidfile.Alive(logs.Process.Pid) {
				t.Fatal("the logs -f process was signalled")
			}
		})
	}
}

package system

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/pidfile"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

func TestRunBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gearshift.yaml")
	os.WriteFile(path, []byte("poll_intervall: 1s\n"), 0o644)
	_, errOut, code := runGearshift(t, "run", "--config", path)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr %s", code, errOut)
	}
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.Contains(errOut, "poll_intervall") {
		t.Errorf("want one sentence naming the key, got:\n%s", errOut)
	}
}

func TestClientCommandsWithoutDaemon(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Control.Socket = filepath.Join(dir, "nobody-home.sock")
	b, _ := cfg.YAML()
	path := filepath.Join(dir, "gearshift.yaml")
	os.WriteFile(path, b, 0o644)
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"force", "heavy"}, {"auto"}} {
		out, errOut, code := runGearshift(t, append(args, "--config", path)...)
		if code != 1 || !strings.Contains(errOut, cfg.Control.Socket) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and a sentence naming the socket", args, code, out, errOut)
		}
	}
}

// TestRunSystemdAndOnExit runs the daemon as systemd would (NOTIFY_SOCKET),
// refuses a second one, and checks on_exit at SIGTERM.
func TestRunSystemdAndOnExit(t *testing.T) {
	notifyPath := filepath.Join(t.TempDir(), "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	d := startDaemonEnv(t, func(cfg *config.Config) { cfg.OnExit = "heavy" }, "NOTIFY_SOCKET="+notifyPath)

	want := func(msg string) {
		t.Helper()
		buf := make([]byte, 512)
		for {
			notify.SetReadDeadline(time.Now().Add(30 * time.Second))
			n, err := notify.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %q from the daemon: %v", msg, err)
			}
			if strings.Contains(string(buf[:n]), msg) {
				return
			}
		}
	}
	want("READY=1")
	if _, _, code := d.gs("force", "moderate"); code != 0 {
		t.Fatal("force moderate failed")
	}
	want("STATUS=gear moderate")

	pid, err := pidfile.Running(d.cfg.PIDFile)
	if err != nil || pid != d.cmd.Process.Pid {
		t.Errorf("pid file holds %d (%v), want %d", pid, err, d.cmd.Process.Pid)
	}
	_, errOut, code := runGearshift(t, "run", "--config", d.configPath)
	if code != 1 || !strings.Contains(errOut, "already running") {
		t.Errorf("second daemon: exit %d, %s", code, errOut)
	}

	d.cmd.Process.Signal(syscall.SIGTERM)
	want("STOPPING=1")
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if a := activeVCL(t, d.v); !strings.HasPrefix(a, "gearshift-heavy-") {
		t.Errorf("on_exit heavy: varnish runs %s", a)
	}
}

// notifySocket listens where a daemon's NOTIFY_SOCKET points and returns
// the env entry and a function that waits for a message containing msg
// and returns it.
func notifySocket(t *testing.T) (env string, want func(msg string) string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return "NOTIFY_SOCKET=" + path, func(msg string) string {
		t.Helper()
		buf := make([]byte, 512)
		for {
			conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %q from the daemon: %v", msg, err)
			}
			if strings.Contains(string(buf[:n]), msg) {
				return string(buf[:n])
			}
		}
	}
}

// READY=1 means the first poll has finished: the status it answers then
// has a sample, the live target in sync, the dead one reported down.
func TestRunReadyAfterFirstPoll(t *testing.T) {
	env, want := notifySocket(t)
	dead := testenv.FreeAddr(t)
	d := launchDaemon(t, func(cfg *config.Config) {
		cfg.Varnish.Targets = append(cfg.Varnish.Targets, config.Target{Admin: dead, SecretFile: cfg.Varnish.Targets[0].SecretFile})
	}, env, "WATCHDOG_USEC=400000")
	want("READY=1")
	s, err := d.status()
	if err != nil {
		t.Fatal(err)
	}
	if s.Sample == nil {
		t.Errorf("status at READY=1 has no sample")
	}
	if len(s.Targets) != 2 || !s.Targets[0].InSync || s.Targets[1].Reachable || !strings.Contains(s.Targets[1].Error, dead) {
		t.Errorf("targets at READY=1 = %+v, want the first in sync and the second down, naming %s", s.Targets, dead)
	}

	// The watchdog: WATCHDOG_USEC 400ms, a keep-alive every 200ms.
	for i := 0; i < 3; i++ {
		want("WATCHDOG=1")
	}

	// A reload: RELOADING=1 with the monotonic clock, then READY=1.
	d.cmd.Process.Signal(syscall.SIGHUP)
	if msg := want("RELOADING=1"); !strings.Contains(msg, "MONOTONIC_USEC=") {
		t.Errorf("reload notification %q has no MONOTONIC_USEC", msg)
	}
	want("READY=1")
}

// A log that cannot be written (a full disk): the daemon goes on, status
// says why in log_error, check warns, and the metrics count the failures.
func TestRunLogWriteErrorsVisible(t *testing.T) {
	metrics := testenv.FreeAddr(t)
	d := startDaemon(t, func(cfg *config.Config) {
		cfg.Log.File = "/dev/full"
		cfg.MetricsListen = metrics
	})
	if _, _, code := d.gs("force", "moderate"); code != 0 {
		t.Fatal("force moderate failed")
	}
	s, err := d.status()
	if err != nil || s.State != "moderate" || !strings.Contains(s.LogError, "no space left on device") {
		t.Fatalf("status with a full disk = %+v, %v; want moderate and log_error", s, err)
	}
	out, _, code := d.gs("check")
	if code != 1 || !strings.Contains(out, "cannot write its log") {
		t.Errorf("check with a full disk: exit %d, %q; want WARNING", code, out)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var n float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "gearshift_log_write_errors_total ") {
			n, _ = strconv.ParseFloat(strings.TrimPrefix(line, "gearshift_log_write_errors_total "), 64)
		}
	}
	if n < 1 {
		t.Errorf("gearshift_log_write_errors_total = %v, want the failed writes counted", n)
	}
}

// A config that lists session_cookies (0.2's kind) is warned about at
// start and on reload: other cookies are no sessions and are stripped in
// moderate and heavy. The default config says nothing of it.
func TestRunWarnsNarrowSessions(t *testing.T) {
	const warning = "profiles.session_cookies lists the only cookies that make a session"
	narrow := startDaemon(t, func(cfg *config.Config) {
		cfg.Profiles.SessionCookies = []string{"PHPSESSID", "wordpress_logged_in_*"}
	})
	logged := func(d *runningDaemon) int {
		b, err := os.ReadFile(d.cfg.Log.File)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), warning)
	}
	if n := logged(narrow); n != 1 {
		t.Errorf("narrow session_cookies: %d warnings at start, want 1", n)
	}
	if _, stderr, code := narrow.gs("reload"); code != 0 {
		t.Fatalf("reload: exit %d: %s", code, stderr)
	}
	if n := logged(narrow); n != 2 {
		t.Errorf("narrow session_cookies: %d warnings after a reload, want 2", n)
	}
	if n := logged(startDaemon(t, nil)); n != 0 {
		t.Errorf("default config: %d session_cookies warnings, want none", n)
	}
}

package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/hooks"
	"github.com/gearshift/gearshift/controller/sdnotify"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/timefmt"
)

func hookScript(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "hooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// alive tells whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestHookRunsOnEachTransition(t *testing.T) {
	out := filepath.Join(t.TempDir(), "events")
	r := newRig(t, func(cfg *config.Config) {
		cfg.Hooks.OnChange = []string{hookScript(t, "record.sh"), out, "second arg"}
	})
	ctx := context.Background()
	r.tick(t) // light: no transition, no hook
	r.sensor.set(3)
	r.tick(t) // light → heavy
	r.c.handle(ctx, request{kind: reqForce, state: state.Light})
	r.c.handle(ctx, request{kind: reqAuto})
	r.tick(t) // light → heavy again

	var lines []string
	testenv.Eventually(t, "three hook runs", time.Minute, func() bool {
		b, _ := os.ReadFile(out)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(lines) == 3 && r.logged("hook ran") == 3
	})
	changes := r.logs.FilterMessage("state change").All()
	if len(changes) != 3 {
		t.Fatalf("%d state changes, want 3", len(changes))
	}
	want := []struct{ from, to, mode string }{
		{"light", "heavy", "auto"},
		{"heavy", "light", "forced"},
		{"light", "heavy", "auto"},
	}
	// Two arguments: no shell split "second arg".
	for i, w := range want {
		reason := changes[i].ContextMap()["reason"].(string)
		if got, exp := lines[i], fmt.Sprintf("%s|%s|%s|%s|2", w.from, w.to, w.mode, reason); got != exp {
			t.Errorf("hook run %d saw %q, want %q", i, got, exp)
		}
	}
	ran := r.logs.FilterMessage("hook ran").All()
	if f := ran[0].ContextMap(); f["output"] != "recorded heavy" || f["exit_code"] != int64(0) || f["to"] != "heavy" {
		t.Errorf("hook log entry fields = %v", f)
	}
}

func TestHangingHookIsKilledAndNeverHoldsTheLoop(t *testing.T) {
	dir := t.TempDir()
	const timeout = 8 * time.Second
	r := newRig(t, func(cfg *config.Config) {
		cfg.Hooks.OnChange = []string{hookScript(t, "hang.sh"), dir}
		cfg.Hooks.Timeout = timefmt.Duration(timeout)
	})
	ctx := context.Background()
	r.tick(t)
	if resp := r.c.handle(ctx, request{kind: reqForce, state: state.Heavy}); resp.err != nil {
		t.Fatal(resp.err)
	}
	var hook, child int
	testenv.Eventually(t, "the hook to start", time.Minute, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pids"))
		return err == nil && len(strings.Fields(string(b))) == 2 &&
			func() bool { _, err := fmt.Sscan(string(b), &hook, &child); return err == nil }()
	})

	// While the hook hangs, the loop goes on: ten more shifts, each
	// applied to Varnish and answered.
	for i := 0; i < 10; i++ {
		st := []state.Gear{state.Light, state.Heavy}[i%2]
		resp := r.c.handle(ctx, request{kind: reqForce, state: st})
		if resp.err != nil || resp.status.State != st.String() {
			t.Fatalf("force %s while a hook hangs = %+v, %v", st, resp.status, resp.err)
		}
		r.wantActive(t, st)
	}
	r.tick(t)
	if !alive(hook) || !alive(child) {
		t.Fatalf("the hook (pid %d, child %d) ended before its timeout: the loop did not run past it", hook, child)
	}
	if n := r.logged("hook timed out and was killed"); n != 0 {
		t.Fatal("the hook timed out before the loop finished its shifts")
	}
	// Eight shifts wait, the two oldest of the ten were skipped.
	if n := r.logged("hook skipped: gear changes came faster than the hook runs"); n != 2 {
		t.Errorf("%d hooks skipped, want 2", n)
	}

	testenv.Eventually(t, "the hook's timeout", time.Minute, func() bool { return r.logged("hook timed out and was killed") == 1 })
	killed := r.logs.FilterMessage("hook timed out and was killed").All()[0].ContextMap()
	if killed["timeout"] != timeout || killed["to"] != "heavy" {
		t.Errorf("timeout log entry = %v", killed)
	}
	testenv.Eventually(t, "the hook's process group to die", time.Minute, func() bool { return !alive(hook) && !alive(child) })
	testenv.Eventually(t, "the queued hooks", time.Minute, func() bool { return r.logged("hook ran") == 8 })
	if out := r.logs.FilterMessage("hook ran").All()[7].ContextMap()["output"]; out != "quick heavy" {
		t.Errorf("last queued hook printed %q, want the last shift's gear", out)
	}
}

// TestHookDoesNotInheritSystemdEnv: under systemd (or `gearshift start`) the
// daemon holds NOTIFY_SOCKET, the watchdog's and socket activation's
// variables; a hook must not get them, or it could tell systemd READY=1 or
// WATCHDOG=1 for the daemon.
func TestHookDoesNotInheritSystemdEnv(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	r := newRig(t, func(cfg *config.Config) {
		cfg.Hooks.OnChange = []string{hookScript(t, "env.sh"), out}
	})
	// Set after the rig's varnishd started: only the daemon has them.
	pid := strconv.Itoa(os.Getpid())
	for _, name := range sdnotify.EnvNames {
		value := map[string]string{"NOTIFY_SOCKET": filepath.Join(dir, "notify.sock"), "WATCHDOG_USEC": "30000000",
			"WATCHDOG_PID": pid, "LISTEN_FDS": "1", "LISTEN_PID": pid, "LISTEN_FDNAMES": "control"}[name]
		if value == "" {
			t.Fatalf("no value for %s", name)
		}
		t.Setenv(name, value)
	}
	r.tick(t) // light
	r.sensor.set(3)
	r.tick(t) // light → heavy: the hook runs
	testenv.Eventually(t, "the hook run", time.Minute, func() bool { return r.logged("hook ran") == 1 })
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(b), "\n")
	has := func(env []string, name string) bool {
		for _, kv := range env {
			if strings.HasPrefix(kv, name+"=") {
				return true
			}
		}
		return false
	}
	if !has(env, hooks.EnvTo) || !has(env, "PATH") {
		t.Fatalf("hook environment lacks %s or PATH: %q", hooks.EnvTo, env)
	}
	for _, name := range sdnotify.EnvNames {
		if os.Getenv(name) == "" {
			t.Errorf("daemon environment lacks %s", name)
		}
		if has(env, name) {
			t.Errorf("hook inherited %s", name)
		}
	}
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/pidfile"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
)

// stub starts a process that passes for the gearshift daemon: bash that
// holds the pid file named by config locked, sets traps, writes its pid
// there and then waits for signals. stub returns once the pid is there,
// so that no signal comes before the traps are set.
func stub(t *testing.T, traps string) (config string, pid int) {
	t.Helper()
	// A socket of its own: no daemon on the default one may answer for the stub.
	config, dir := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\npid_file: $DIR/gearshift.pid\ncontrol: { socket: $DIR/gearshift.sock }\n")
	// HUP and TERM at their defaults first: bash cannot trap a signal
	// ignored when it starts (the tests run under nohup, say), and a
	// daemon started by systemd has them at their defaults.
	cmd := exec.Command("env", "--default-signal=HUP,TERM", "bash", "-c", `exec 9>gearshift.pid; flock -x 9; `+traps+`; echo $$ >&9; while :; do sleep 0.05; done`)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	pid = cmd.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if p, _ := pidfile.Running(filepath.Join(dir, "gearshift.pid")); p == pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stub never held its pid file")
		}
	}
	return config, pid
}

func TestStopWaitsAndTimesOut(t *testing.T) {
	config, pid := stub(t, `trap "" TERM`)
	code, stdout, stderr := runMain(t, "stop", "--config", config, "--timeout", "200ms")
	want := fmt.Sprintf("gearshift (pid %d) is still running after 200ms", pid)
	if code != 1 || stdout != "" || !strings.Contains(stderr, want) {
		t.Errorf("stop of a daemon that ignores SIGTERM: exit %d, %q %q; want 1 and %q", code, stdout, stderr, want)
	}
	if !pidfile.Alive(pid) {
		t.Error("the stub died")
	}
}

func TestStopAndReloadSignal(t *testing.T) {
	config, pid := stub(t, `trap "echo hup >> hups" HUP; trap "exit 0" TERM`)
	dir := filepath.Dir(config)
	code, stdout, stderr := runMain(t, "reload", "--config", config)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("sent SIGHUP to gearshift (pid %d): it does not answer", pid)) {
		t.Errorf("reload: exit %d, %q %q", code, stdout, stderr)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(dir, "hups")); string(b) == "hup\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stub never got SIGHUP")
		}
	}
	code, stdout, stderr = runMain(t, "stop", "--config", config)
	if code != 0 || stdout != fmt.Sprintf("gearshift stopped (pid %d)\n", pid) {
		t.Errorf("stop: exit %d, %q %q", code, stdout, stderr)
	}
	if pidfile.Alive(pid) {
		t.Error("still alive after stop returned")
	}
}

// A reload with a config the daemon would refuse sends nothing.
func TestReloadRefusesBadConfig(t *testing.T) {
	config, _ := stub(t, `trap "echo hup >> hups" HUP`)
	b, _ := os.ReadFile(config)
	os.WriteFile(config, append(b, "on_exit: never\n"...), 0o644)
	code, _, stderr := runMain(t, "reload", "--config", config)
	if code != 2 || !strings.Contains(stderr, "config "+config+": on_exit: must be one of") || !strings.Contains(stderr, "not reloading") {
		t.Errorf("reload with a bad config: exit %d, %q", code, stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(filepath.Dir(config), "hups")); err == nil {
		t.Error("SIGHUP sent despite the bad config")
	}
}

// A stale pid file naming a process that is not gearshift (the pid was
// reused) must not get that process killed.
func TestStopStalePidFile(t *testing.T) {
	config, dir := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\npid_file: $DIR/gearshift.pid\n")
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	os.WriteFile(filepath.Join(dir, "gearshift.pid"), []byte(strconv.Itoa(sleep.Process.Pid)), 0o644)
	code, stdout, stderr := runMain(t, "stop", "--config", config)
	if code != 0 || !strings.Contains(stdout, "not running") {
		t.Errorf("stop with a stale pid file: exit %d, %q %q", code, stdout, stderr)
	}
	if err := sleep.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the unrelated process was signalled: %v", err)
	}
	if code, _, stderr := runMain(t, "reload", "--config", config); code != 1 || !strings.Contains(stderr, "not running") {
		t.Errorf("reload with a stale pid file: exit %d, %q", code, stderr)
	}
}

// A stale pid file naming a process that merely has "gearshift" among its
// arguments is stale for every command: start (the pid file check) and
// stop agree.
func TestPidCheckIgnoresArguments(t *testing.T) {
	config, dir := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\npid_file: $DIR/gearshift.pid\n")
	sh := exec.Command("sh", "-c", "sleep 60; true", "gearshift")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sh.Process.Kill(); sh.Wait() }()
	pid := sh.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "gearshift") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell never started")
		}
	}
	pidFile := filepath.Join(dir, "gearshift.pid")
	os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644)

	if p, err := pidfile.Running(pidFile); p != 0 || err != nil {
		t.Errorf("pidfile.Running = %d, %v for a shell with gearshift as an argument; want 0", p, err)
	}
	if code, stdout, stderr := runMain(t, "stop", "--config", config); code != 0 || !strings.Contains(stdout, "not running") {
		t.Errorf("stop: exit %d, %q %q; want not running", code, stdout, stderr)
	}
	pf, err := pidfile.Write(pidFile)
	if err != nil {
		t.Errorf("pidfile.Write over the stale file: %v", err)
	}
	pf.Remove()
}

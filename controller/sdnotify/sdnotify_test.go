package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v, %v", sent, err)
	}

	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if sent, err := Notify("READY=1", "STATUS=gear light"); !sent || err != nil {
		t.Fatalf("Notify: %v, %v", sent, err)
	}
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1\nSTATUS=gear light" {
		t.Fatalf("received %q, %v", buf[:n], err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name, usec, pid string
		want            time.Duration
		err             bool
	}{
		{name: "off"},
		{name: "for us", usec: "30000000", pid: self, want: 15 * time.Second},
		{name: "no pid given", usec: "2000000", want: time.Second},
		{name: "for another process", usec: "30000000", pid: "1"},
		{name: "garbage", usec: "soon", err: true},
		{name: "zero", usec: "0", err: true},
		{name: "bad pid", usec: "1000", pid: "me", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WATCHDOG_USEC", tc.usec)
			t.Setenv("WATCHDOG_PID", tc.pid)
			got, err := WatchdogInterval()
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("WatchdogInterval() = %s, %v; want %s, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestNotifierUntilReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	n := New(true)
	for _, msg := range []string{"STATUS=starting", "READY=1"} {
		if sent, err := n.Notify(msg); !sent || err != nil {
			t.Fatalf("Notify(%q) = %v, %v", msg, sent, err)
		}
	}
	if sent, err := n.Notify("STATUS=gear heavy"); sent || err != nil {
		t.Errorf("after READY=1: Notify = %v, %v; want silence", sent, err)
	}
	if !strings.HasPrefix(Reloading()[0], "RELOADING=1") || !strings.HasPrefix(Reloading()[1], "MONOTONIC_USEC=") {
		t.Errorf("Reloading() = %q", Reloading())
	}
}

// A child's Notify reaches the Listener through the entry of Env; only
// READY=1 counts as ready, and Close removes the socket.
func TestListener(t *testing.T) {
	l, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	path, ok := strings.CutPrefix(l.Env(), "NOTIFY_SOCKET=")
	if !ok {
		t.Fatalf("Env() = %q", l.Env())
	}
	t.Setenv("NOTIFY_SOCKET", path)
	ready := l.Ready(time.Now().Add(time.Minute))
	if sent, err := Notify("STATUS=starting"); !sent || err != nil {
		t.Fatalf("Notify = %v, %v", sent, err)
	}
	if sent, err := Notify("STATUS=loaded", "READY=1"); !sent || err != nil {
		t.Fatalf("Notify = %v, %v", sent, err)
	}
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("READY=1 was sent but never seen")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("the socket's directory is left after Close: %v", err)
	}

	// No READY=1 before the deadline: never ready.
	l, err = Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("NOTIFY_SOCKET", strings.TrimPrefix(l.Env(), "NOTIFY_SOCKET="))
	ready = l.Ready(time.Now().Add(-time.Second))
	if sent, err := Notify("READY=1"); !sent || err != nil {
		t.Fatalf("Notify = %v, %v", sent, err)
	}
	select {
	case <-ready:
		t.Error("ready after the deadline had passed")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestChildEnv(t *testing.T) {
	env := []string{"PATH=/usr/bin", "NOTIFY_SOCKET=/run/x", "WATCHDOG_USEC=1000", "WATCHDOG_PID=7",
		"LISTEN_FDS=1", "LISTEN_PID=7", "LISTEN_FDNAMES=ctl", "NOTIFY_SOCKETX=kept", "HOME=/root"}
	orig := append([]string(nil), env...)
	got := strings.Join(ChildEnv(env), " ")
	if want := "PATH=/usr/bin NOTIFY_SOCKETX=kept HOME=/root"; got != want {
		t.Errorf("ChildEnv = %q, want %q", got, want)
	}
	if strings.Join(env, " ") != strings.Join(orig, " ") {
		t.Errorf("ChildEnv changed its argument: %q", env)
	}
}

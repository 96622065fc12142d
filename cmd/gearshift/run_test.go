package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// A daemon that accepts a request but does not answer in time is reported
// as busy, not as "not running".
func TestClientFailureBusyDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "busy.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = api.NewClient(socket).Force(ctx, "", state.Heavy, 0)
	code, err := clientFailure(err)
	if code != exitFailure || err == nil || strings.Contains(err.Error(), "is the daemon running") ||
		!strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Errorf("clientFailure = %d, %v; want 1 and a busy daemon", code, err)
	}
}

// The daemon's refusals map to the exit codes of docs/operating.md#commands: a request it
// cannot take is a usage error (2), a refusal for want of permission a
// runtime failure (1).
func TestClientFailureExitCodes(t *testing.T) {
	for _, tc := range []struct {
		status, code int
	}{
		{http.StatusBadRequest, exitUsage},
		{http.StatusForbidden, exitFailure},
		{http.StatusInternalServerError, exitFailure},
	} {
		code, err := clientFailure(&api.APIError{StatusCode: tc.status, Message: "nope"})
		if code != tc.code || err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("clientFailure(%d) = %d, %v; want %d and the daemon's message", tc.status, code, err, tc.code)
		}
	}
}

// A SIGHUP or SIGUSR1 sent as soon as the pid file appears (logrotate, a
// reload right after start) must not kill the daemon.
func TestRunSignalDuringStartup(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("secret\n"), 0o600)
	cfg := config.Default()
	cfg.Varnish.Targets = []config.Target{{Admin: "127.0.0.1:1", SecretFile: secret}}
	cfg.Control.Socket = filepath.Join(dir, "gearshift.sock")
	cfg.PIDFile = filepath.Join(dir, "gearshift.pid")
	cfg.Log.File = filepath.Join(dir, "gearshift.log")
	cfg.History.Dir = filepath.Join(dir, "history")
	cfg.PollInterval = 0 // no ticks: nothing but start and the signals
	b, _ := cfg.YAML()
	path := filepath.Join(dir, "gearshift.yaml")
	os.WriteFile(path, b, 0o644)
	a := &app{stdout: io.Discard, stderr: io.Discard, configPath: path, configSet: true}

	done := make(chan error, 1)
	go func() {
		_, err := runDaemon(a, cfg, false)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(cfg.PIDFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no pid file")
		}
		runtime.Gosched()
	}
	// Without the daemon's handlers these end the test binary.
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := api.NewClient(cfg.Control.Socket).Status(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not answering: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("daemon did not stop on SIGTERM")
	}
}

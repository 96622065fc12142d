package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// hangingSensor blocks in Sample while hang is set, telling entered.
type hangingSensor struct {
	mu      sync.Mutex
	hang    chan struct{} // nil: answer at once
	entered chan struct{}
}

func (h *hangingSensor) Sample(ctx context.Context) (sensor.Sample, error) {
	h.mu.Lock()
	hang := h.hang
	h.mu.Unlock()
	if hang != nil {
		h.entered <- struct{}{}
		<-hang
	}
	return sensor.Sample{Time: time.Now(), Load1: 0.1, CPUs: 1, MemTotal: 1 << 30, MemAvailable: 1 << 29}, nil
}

// The keep-alives come from the loop: READY=1 after the first poll, then
// WATCHDOG=1 while it runs, none while a tick hangs.
func TestLoopSendsWatchdog(t *testing.T) {
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.Varnish.Targets = []config.Target{{Admin: "127.0.0.1:1", SecretFile: "/nonexistent"}}
	cfg.PollInterval = timefmt.Duration(50 * time.Millisecond)
	msgs := make(chan string, 1024)
	hs := &hangingSensor{entered: make(chan struct{})}
	c, err := New(Options{
		Config: cfg,
		Sensor: hs,
		Dial: func(string, string) (varnish.Admin, error) {
			return nil, errors.New("connect: nothing listens")
		},
		Build: BuildProfiles,
		Notify: func(state ...string) {
			for _, s := range state {
				msgs <- s
			}
		},
		WatchdogInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	next := func() string {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("no notification within 30s")
			return ""
		}
	}
	if m := next(); m != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", m)
	}
	<-c.Ready()
	for n := 0; n < 3; {
		if next() == "WATCHDOG=1" {
			n++
		}
	}

	// Hang the loop in a tick: the keep-alives stop.
	hang := make(chan struct{})
	hs.mu.Lock()
	hs.hang = hang
	hs.mu.Unlock()
	<-hs.entered
	for len(msgs) > 0 {
		<-msgs // sent before the tick began
	}
	time.Sleep(200 * time.Millisecond) // 20 keep-alive intervals
	if n := len(msgs); n != 0 {
		t.Errorf("%d notifications while the loop hung, want none", n)
	}
	hs.mu.Lock()
	hs.hang = nil
	hs.mu.Unlock()
	close(hang)
	for next() != "WATCHDOG=1" {
	}
}

package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// countingSensor counts its samples and tells each one on polled.
type countingSensor struct {
	n      atomic.Int64
	polled chan struct{}
}

func (s *countingSensor) Sample(context.Context) (sensor.Sample, error) {
	s.n.Add(1)
	select {
	case s.polled <- struct{}{}:
	default:
	}
	return sensor.Sample{Time: time.Now(), Load1: 0.1, CPUs: 1, MemTotal: 1 << 30, MemAvailable: 1 << 29}, nil
}

// A reload whose config is slow to read (a big file, a slow disk, a
// config that takes long to judge) holds up no poll and no request: the
// loop polls on and answers force while the config is read, and takes the
// new one when it is ready.
func TestReloadDoesNotBlockTheLoop(t *testing.T) {
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.Varnish.Targets = []config.Target{{Admin: "127.0.0.1:1", SecretFile: "/nonexistent"}}
	cfg.PollInterval = timefmt.Duration(20 * time.Millisecond)
	cs := &countingSensor{polled: make(chan struct{})}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // a failing test lets the loop stop
	c, err := New(Options{
		Config: cfg,
		Sensor: cs,
		Dial: func(string, string) (Target, error) {
			return nil, errors.New("connect: nothing listens")
		},
		Build: BuildProfiles,
		LoadConfig: func() (*config.Config, error) {
			close(entered)
			<-release
			next := *cfg
			next.Hysteresis.UpConfirm = 7
			return &next, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { unblock(); cancel(); <-done }()
	<-c.Ready()

	reloaded := make(chan error, 1)
	go func() { _, err := c.Reload(ctx); reloaded <- err }()
	<-entered
	before := cs.n.Load()
	for i := 0; i < 3; i++ {
		select {
		case <-cs.polled:
		case <-time.After(30 * time.Second):
			t.Fatalf("no poll for 30s while a reload read its config (%d polls before it)", before)
		}
	}
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	if s, err := c.Force(fctx, state.Heavy, time.Time{}); err != nil || s.State != "heavy" {
		t.Fatalf("force while a reload read its config = %+v, %v", s, err)
	}
	select {
	case err := <-reloaded:
		t.Fatalf("reload returned %v before its config was read", err)
	default:
	}

	unblock()
	if err := <-reloaded; err != nil {
		t.Fatalf("reload = %v", err)
	}
	if got := c.Rules().UpConfirm; got != 7 {
		t.Errorf("rules after the reload have up_confirm %d, want the new config's 7", got)
	}
}

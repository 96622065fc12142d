package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

func TestForceAndAuto(t *testing.T) {
	r := newRig(t, nil)
	r.tick(t)
	ctx := context.Background()

	until := r.clock.now().Add(time.Minute)
	resp := r.c.handle(ctx, request{kind: reqForce, state: state.Heavy, until: until})
	if resp.err != nil || resp.status.Mode != "forced" || resp.status.ForcedUntil == nil || !resp.status.ForcedUntil.Equal(until) {
		t.Fatalf("force = %+v, %v", resp.status, resp.err)
	}
	r.wantActive(t, state.Heavy)
	r.tick(t)
	r.wantActive(t, state.Heavy) // pinned despite no load

	r.clock.add(2 * time.Minute) // past the deadline; stepping down is one gear at a time
	r.tick(t)
	if s := r.c.Status(); s.Mode != "auto" {
		t.Fatalf("force did not expire: %+v", s)
	}

	resp = r.c.handle(ctx, request{kind: reqForce, state: state.Moderate})
	if resp.status.Mode != "forced" || resp.status.ForcedUntil != nil {
		t.Fatalf("force until auto = %+v", resp.status)
	}
	r.wantActive(t, state.Moderate)
	r.clock.add(time.Hour)
	r.tick(t)
	r.wantActive(t, state.Moderate)
	resp = r.c.handle(ctx, request{kind: reqAuto})
	if resp.status.Mode != "auto" {
		t.Fatalf("auto = %+v", resp.status)
	}
}

func TestRunServesRequestsAndAppliesOnExit(t *testing.T) {
	r := newRig(t, func(cfg *config.Config) { cfg.OnExit = "heavy" })
	r.tick(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.c.Run(ctx) }()

	s, err := r.c.Force(context.Background(), "", state.Moderate, time.Time{})
	if err != nil || s.State != "moderate" {
		t.Fatalf("Force = %+v, %v", s, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, active := r.vcls(t); active != r.c.set[state.Heavy].Name {
		t.Errorf("on_exit heavy: active = %s", active)
	}
	if _, err := r.c.Auto(context.Background(), ""); err != api.ErrStopped {
		t.Errorf("Auto after stop = %v, want api.ErrStopped", err)
	}
}

func TestForceExpiresWhileSensorsFail(t *testing.T) {
	r := newRig(t, nil)
	r.tick(t)
	until := r.clock.now().Add(time.Minute)
	if resp := r.c.handle(context.Background(), request{kind: reqForce, state: state.Heavy, until: until}); resp.err != nil {
		t.Fatal(resp.err)
	}
	r.sensor.mu.Lock()
	r.sensor.err = errors.New("no /proc")
	r.sensor.mu.Unlock()
	r.tick(t)
	if s := r.c.Status(); s.Mode != "forced" {
		t.Fatalf("force released before its deadline: %+v", s)
	}
	r.clock.add(2 * time.Minute)
	s := r.tick(t)
	if s.Mode != "auto" || s.ForcedUntil != nil || !strings.HasPrefix(s.Reason, "force expired") {
		t.Fatalf("force outlived its deadline while the sensors failed: %+v", s)
	}
	r.wantActive(t, state.Heavy) // resumes from the pinned gear; the next good sample decides
}

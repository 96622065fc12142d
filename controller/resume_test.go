package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
)

func TestResumesGearVarnishRuns(t *testing.T) {
	first := newRig(t, nil)
	first.tick(t)
	if resp := first.c.handle(context.Background(), request{kind: reqForce, state: state.Heavy}); resp.err != nil {
		t.Fatal(resp.err)
	}
	first.wantActive(t, state.Heavy)
	for _, tg := range first.c.targets {
		tg.Close() // the daemon stops with on_exit: keep
	}

	// A new daemon on the same Varnish, no load: it resumes heavy rather
	// than dropping to light, and steps down only after min_dwell.
	again := newRigOn(t, first.v, nil)
	s := again.tick(t)
	if s.State != "heavy" || s.Mode != "auto" || s.Transitions != 0 {
		t.Fatalf("first status of the new daemon = %+v, want heavy resumed in auto mode", s)
	}
	again.wantActive(t, state.Heavy)
	if entries := again.logs.FilterMessage("resuming gear").All(); len(entries) != 1 ||
		!strings.HasPrefix(entries[0].ContextMap()["reason"].(string), "resumed heavy, the gear varnish") {
		t.Errorf("\"resuming gear\" log entries = %+v, want one with the reason", entries)
	}
	if got := again.cmds.take(); len(got) != 0 {
		t.Errorf("resuming sent %v, want nothing (profiles unchanged, already active)", got)
	}

	// A fresh Varnish with only its boot VCL: nothing to resume.
	fresh := newRig(t, nil)
	if s := fresh.tick(t); s.State != "light" || strings.Contains(s.Reason, "resumed") {
		t.Fatalf("fresh varnish: %+v, want light", s)
	}
}

// The resume check at start asks every target at once, within the sync
// wait: a target whose admin port hangs does not hold up the first poll,
// nor keep the others from being asked.
func TestResumeDoesNotWaitForAHangingTarget(t *testing.T) {
	first := newRig(t, nil)
	first.tick(t)
	if resp := first.c.handle(context.Background(), request{kind: reqForce, state: state.Heavy}); resp.err != nil {
		t.Fatal(resp.err)
	}
	first.wantActive(t, state.Heavy)
	for _, tg := range first.c.targets {
		tg.Close()
	}

	const hung = "192.0.2.1:6082" // never dialled: the fake dial below hangs on it
	release := make(chan struct{})
	defer close(release)
	cfg := testConfig(first.v)
	cfg.Varnish.Targets = []config.Target{{Admin: hung, SecretFile: first.v.SecretFile}, cfg.Varnish.Targets[0]}
	clk := &clock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}
	dial := varnish.DialAdmin(30 * time.Second)
	c, err := New(Options{
		Config: cfg,
		Sensor: &fakeSensor{now: clk.now},
		Dial: func(addr, secret string) (varnish.Admin, error) {
			if addr == hung {
				<-release
				return nil, errors.New("released")
			}
			return dial(addr, secret)
		},
		Build:    BuildProfiles,
		Logger:   zap.NewNop(),
		Now:      clk.now,
		SyncWait: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.waitIdle()
		for _, tg := range c.targets {
			tg.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ticked := make(chan struct{})
	go func() { c.Tick(ctx); close(ticked) }()
	select {
	case <-ticked:
	case <-time.After(30 * time.Second):
		t.Fatal("the first poll is held up by a target whose admin port hangs")
	}
	// No load, no transition: heavy can only have been resumed.
	if s := c.Status(); s.State != "heavy" || s.Transitions != 0 || !s.Targets[1].InSync {
		t.Errorf("first status = %+v, want heavy resumed from the healthy target", s)
	}
}

package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
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
		Dial: func(string, string) (varnish.Admin, error) {
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
	if s, err := c.Force(fctx, "", state.Heavy, time.Time{}); err != nil || s.State != "heavy" {
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

func TestReload(t *testing.T) {
	r := newRig(t, nil)
	r.sensor.set(1)
	r.tick(t)
	r.wantActive(t, state.Moderate)
	old := r.c.set
	ctx := context.Background()

	t.Run("broken profile keeps the old set", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.vcl")
		os.WriteFile(bad, []byte("vcl 4.1;\nthis does not compile;\n"), 0o644)
		before := r.c.targets[0].Settings()
		r.next = func() (*config.Config, error) {
			cfg := testConfig(r.v)
			cfg.Profiles.Heavy.VCLFile = bad
			cfg.Varnish.Timeout = timefmt.Duration(45 * time.Second)
			return cfg, nil
		}
		resp := r.c.handle(ctx, request{kind: reqReload})
		if resp.err == nil || resp.status.ConfigError == "" {
			t.Fatalf("broken reload = %+v, %v", resp.status, resp.err)
		}
		if r.c.set != old {
			t.Fatal("profile set replaced by a broken one")
		}
		// On any error the old config stays, the targets' timeouts included.
		if after := r.c.targets[0].Settings(); after != before {
			t.Errorf("a failed reload changed the target's settings to %+v, want %+v", after, before)
		}
		r.wantActive(t, state.Moderate)
		names, _ := r.vcls(t)
		for n := range names {
			if strings.HasPrefix(n, profiles.NamePrefix) && n != old[0].Name && n != old[1].Name && n != old[2].Name {
				t.Errorf("abandoned profile %s left loaded", n)
			}
		}
	})

	t.Run("good reload switches and discards the old", func(t *testing.T) {
		r.next = func() (*config.Config, error) {
			cfg := testConfig(r.v)
			cfg.Profiles.StaticTTL = timefmt.Duration(2 * time.Hour) // new text, new names
			return cfg, nil
		}
		resp := r.c.handle(ctx, request{kind: reqReload})
		if resp.err != nil || resp.status.ConfigError != "" {
			t.Fatalf("reload = %+v, %v", resp.status, resp.err)
		}
		if r.c.set == old {
			t.Fatal("profile set not replaced")
		}
		r.wantActive(t, state.Moderate)
		names, _ := r.vcls(t)
		for _, p := range old {
			if names[p.Name] {
				t.Errorf("old profile %s not discarded", p.Name)
			}
		}
		for _, p := range r.c.set {
			if !names[p.Name] {
				t.Errorf("new profile %s not loaded", p.Name)
			}
		}
	})

	t.Run("an unreachable new target does not block a reload", func(t *testing.T) {
		dead := testenv.FreeAddr(t)
		r.next = func() (*config.Config, error) {
			cfg := testConfig(r.v)
			cfg.Profiles.StaticTTL = timefmt.Duration(2 * time.Hour)
			cfg.Varnish.Targets = append(cfg.Varnish.Targets, config.Target{Admin: dead, SecretFile: r.v.SecretFile})
			return cfg, nil
		}
		resp := r.c.handle(ctx, request{kind: reqReload})
		if resp.err != nil || len(resp.status.Targets) != 2 || resp.status.Targets[1].Reachable || !resp.status.Targets[0].InSync {
			t.Fatalf("reload with a dead target = %+v, %v", resp.status, resp.err)
		}
		r.next = func() (*config.Config, error) {
			cfg := testConfig(r.v)
			cfg.Profiles.StaticTTL = timefmt.Duration(2 * time.Hour)
			return cfg, nil
		}
		if resp := r.c.handle(ctx, request{kind: reqReload}); resp.err != nil || len(resp.status.Targets) != 1 {
			t.Fatalf("reload dropping the dead target = %+v, %v", resp.status, resp.err)
		}
	})

	t.Run("unchanged reload is a no-op", func(t *testing.T) {
		r.cmds.take()
		resp := r.c.handle(ctx, request{kind: reqReload})
		if resp.err != nil {
			t.Fatal(resp.err)
		}
		if got := r.cmds.take(); len(got) != 0 {
			t.Errorf("unchanged reload sent %v", got)
		}
	})
}

package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// Benchmarks of a gear switch as the daemon makes it, against real varnishd
// instances with gearshift's own rendered profiles:
//
//   - BenchmarkSyncAll/targets=N: the loop's concurrent sync path (syncAll:
//     vcl.list and vcl.use on every target at once, over kept connections)
//     alternating light and heavy, with one and with three targets. The
//     fan-out is worth it when three cost little more than one.
//   - BenchmarkCompileAtSwitch: the naive design, compiling the gear's
//     profile when switching (vcl.inline under a new name, then vcl.use);
//     gearshift preloads the three profiles and only runs vcl.use.
//
// Each reports p50, p99 and max per switch besides ns/op.

func BenchmarkSyncAll(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			c := benchController(b, n)
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				want := state.Heavy
				if i%2 == 1 {
					want = state.Light
				}
				start := time.Now()
				ms := c.syncAll(ctx, want, -1)
				lat = append(lat, time.Since(start))
				if ms < 0 {
					b.Fatalf("switch %d to %s: no target switched: %+v", i, want, c.publish().Targets)
				}
			}
			b.StopTimer()
			for _, t := range c.targets {
				if !t.inSync || t.failures > 0 {
					b.Fatalf("target %s not in sync after the run: %s", t.addr, t.err)
				}
			}
			varnishtest.ReportLatency(b, lat)
		})
	}
}

func BenchmarkCompileAtSwitch(b *testing.B) {
	v := varnishtest.Start(b, varnishtest.Config{})
	set, err := BuildProfiles(benchConfig([]*varnishtest.Varnish{v}))
	if err != nil {
		b.Fatal(err)
	}
	tg, err := DialAdmin(60*time.Second)(v.AdminAddr, v.SecretFile)
	if err != nil {
		b.Fatal(err)
	}
	defer tg.Close()
	ctx := context.Background()
	prev := ""
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := set[state.Heavy]
		if i%2 == 1 {
			p = set[state.Light]
		}
		name := fmt.Sprintf("naive-%s-%d", p.State, i)
		start := time.Now()
		if err := tg.VCLInline(ctx, name, p.VCL, "auto"); err != nil {
			b.Fatalf("vcl.inline %s: %v", name, err)
		}
		if err := tg.VCLUse(ctx, name); err != nil {
			b.Fatalf("vcl.use %s: %v", name, err)
		}
		lat = append(lat, time.Since(start))
		// The naive design must also drop what it compiled before, or
		// Varnish accumulates programs; not part of the switch itself.
		if prev != "" {
			if err := tg.VCLDiscard(ctx, prev); err != nil {
				b.Fatalf("vcl.discard %s: %v", prev, err)
			}
		}
		prev = name
	}
	b.StopTimer()
	varnishtest.ReportLatency(b, lat)
}

// benchConfig is a default config driving vs, with no ticker.
func benchConfig(vs []*varnishtest.Varnish) *config.Config {
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.Varnish.Targets = nil
	for _, v := range vs {
		cfg.Varnish.Targets = append(cfg.Varnish.Targets, config.Target{Admin: v.AdminAddr, SecretFile: v.SecretFile})
	}
	cfg.Varnish.Timeout = timefmt.Duration(60 * time.Second) // compiles on a busy machine
	cfg.PollInterval = 0
	return cfg
}

// benchController returns a controller driving n fresh varnishd instances,
// each with the three profiles loaded and light active.
func benchController(b *testing.B, n int) *Controller {
	b.Helper()
	vs := make([]*varnishtest.Varnish, n)
	for i := range vs {
		vs[i] = varnishtest.Start(b, varnishtest.Config{})
	}
	clk := &clock{t: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}
	c, err := New(Options{
		Config:   benchConfig(vs),
		Sensor:   &fakeSensor{now: clk.now},
		Dial:     DialAdmin(60 * time.Second),
		Build:    BuildProfiles,
		Logger:   zap.NewNop(),
		Now:      clk.now,
		SyncWait: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.waitIdle()
		for _, t := range c.targets {
			t.close()
		}
	})
	c.syncAll(context.Background(), state.Light, -1) // loads the profiles
	for _, t := range c.targets {
		if !t.inSync {
			b.Fatalf("target %s did not load the profiles: %s", t.addr, t.err)
		}
	}
	return c
}

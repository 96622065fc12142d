package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// BenchmarkSyncAll/targets=N is a gear switch as the daemon makes it,
// against real varnishd instances with gearshift's own rendered profiles:
// the loop's concurrent sync path (syncAll: vcl.list and vcl.use on every
// target at once, over kept connections) alternating light and heavy, with
// one and with three targets. The fan-out is worth it when three cost
// little more than one. It reports p50, p99 and max per switch besides
// ns/op; BenchmarkCompileAtSwitch (controller/varnish) measures the naive
// design beside it.
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
			// The status judges the targets against the machine's gear
			// (light, no tick ran): a run of one switch ends in heavy.
			c.syncAll(ctx, c.machine.Current().Gear, -1)
			for _, ts := range c.publish().Targets {
				if !ts.InSync || ts.Error != "" {
					b.Fatalf("target %s not in sync after the run: %s", ts.Admin, ts.Error)
				}
			}
			varnishtest.ReportLatency(b, lat)
		})
	}
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
		Dial:     varnish.DialAdmin(60 * time.Second),
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
			t.Close()
		}
	})
	c.syncAll(context.Background(), state.Light, -1) // loads the profiles
	for _, ts := range c.publish().Targets {
		if !ts.InSync {
			b.Fatalf("target %s did not load the profiles: %s", ts.Admin, ts.Error)
		}
	}
	return c
}

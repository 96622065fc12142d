package varnish

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// Tests in this package drive one Target against a real varnishd (or a
// fake admin port), with a time of their own: no loop, no sensor.

// counting wraps an Admin and counts the commands that change Varnish.
type counting struct {
	Admin
	mu      sync.Mutex
	changes []string
}

func (c *counting) record(s string) { c.mu.Lock(); c.changes = append(c.changes, s); c.mu.Unlock() }
func (c *counting) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.changes
	c.changes = nil
	return ch
}
func (c *counting) VCLInline(ctx context.Context, name, src, st string) error {
	c.record("inline " + name)
	return c.Admin.VCLInline(ctx, name, src, st)
}
func (c *counting) VCLUse(ctx context.Context, name string) error {
	c.record("use " + name)
	return c.Admin.VCLUse(ctx, name)
}
func (c *counting) VCLLabel(ctx context.Context, label, vcl string) error {
	c.record("label " + label + " " + vcl)
	return c.Admin.VCLLabel(ctx, label, vcl)
}
func (c *counting) VCLDiscard(ctx context.Context, name string) error {
	c.record("discard " + name)
	return c.Admin.VCLDiscard(ctx, name)
}

// rig is one Target on a real varnishd, and what a test reads of it.
type rig struct {
	t    *Target
	v    *varnishtest.Varnish
	cfg  *config.Config
	set  profiles.Set
	now  time.Time // the time the next sync is made at
	logs *observer.ObservedLogs
	cmds *counting // commands sent to v (the last connection)
	// wrap, when set, wraps the Admin of each dial (after counting).
	wrap func(Admin) Admin
}

func testConfig(v *varnishtest.Varnish) *config.Config {
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.Varnish.Targets = []config.Target{{Admin: v.AdminAddr, SecretFile: v.SecretFile}}
	cfg.Varnish.Timeout = timefmt.Duration(30 * time.Second) // VCL compiles on a busy machine
	cfg.PollInterval = 0
	return cfg
}

func noMetrics() Metrics {
	return Metrics{
		Errors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "errors"}),
		Switches: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "switches"}),
	}
}

func newRig(tb testing.TB, edit func(*config.Config)) *rig {
	tb.Helper()
	return newRigOn(tb, varnishtest.Start(tb, varnishtest.Config{}), edit)
}

// newRigOn is newRig driving an already running varnishd.
func newRigOn(tb testing.TB, v *varnishtest.Varnish, edit func(*config.Config)) *rig {
	tb.Helper()
	r := &rig{v: v, now: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC), cfg: testConfig(v)}
	if edit != nil {
		edit(r.cfg)
	}
	set, err := profiles.Build(r.cfg.Site())
	if err != nil {
		tb.Fatal(err)
	}
	r.set = set
	core, logs := observer.New(zapcore.DebugLevel)
	r.logs = logs
	dial := DialAdmin(30 * time.Second)
	tc := r.cfg.Varnish.Targets[0]
	r.t = New(tc.Admin, tc.SecretFile, func(addr, secret string) (Admin, error) {
		a, err := dial(addr, secret)
		if err != nil {
			return nil, err
		}
		r.cmds = &counting{Admin: a}
		if r.wrap != nil {
			return r.wrap(r.cmds), nil
		}
		return r.cmds, nil
	}, SettingsOf(r.cfg), noMetrics(), zap.New(core))
	tb.Cleanup(r.t.Close)
	return r
}

// sync syncs the target to want, then moves the time on by a second.
func (r *rig) sync(tb testing.TB, want state.Gear) (float64, bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms, switched := r.t.Sync(ctx, r.now, &r.set, want)
	r.now = r.now.Add(time.Second)
	return ms, switched
}

// status is the target's status, as the loop shows it in gear st.
func (r *rig) status(st state.Gear) api.TargetStatus { return r.t.Status(r.set[st]) }

// vcls returns varnishd's VCLs and the active one, as varnishadm prints them.
func (r *rig) vcls(tb testing.TB) (names map[string]bool, active string) {
	tb.Helper()
	out, err := r.v.Adm("vcl.list")
	if err != nil {
		tb.Fatal(err)
	}
	names = map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := f[len(f)-1]
		names[name] = true
		if f[0] == "active" {
			active = name
		}
	}
	return names, active
}

func (r *rig) wantActive(tb testing.TB, st state.Gear) {
	tb.Helper()
	want := r.set[st].Name
	if _, active := r.vcls(tb); active != want {
		tb.Fatalf("active VCL = %q, want %q (%s)", active, want, st)
	}
	if ts := r.status(st); !ts.InSync || ts.ActiveVCL != want {
		tb.Fatalf("status = %+v, want in sync on %s", ts, want)
	}
}

func (r *rig) logged(msg string) int { return r.logs.FilterMessage(msg).Len() }

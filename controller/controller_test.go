package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// Tests in this file run the loop's tick against a real varnishd, with a
// fake sensor and a fake clock.

// fakeSensor returns the load it is set to.
type fakeSensor struct {
	mu       sync.Mutex
	load1    float64
	rps      *float64           // client_rps; nil: no Varnish traffic signal
	values   map[string]float64 // more signals' figures
	err      error
	problems []sensor.Problem
	now      func() time.Time
}

func (f *fakeSensor) set(load1 float64) { f.mu.Lock(); f.load1 = load1; f.mu.Unlock() }

func (f *fakeSensor) Sample(context.Context) (sensor.Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return sensor.Sample{}, f.err
	}
	s := sensor.Sample{
		Time: f.now(), Load1: f.load1, Load5: f.load1, Load15: f.load1, Runnable: float64(int(f.load1)), CPUs: 1,
		MemTotal: 8 << 30, MemAvailable: 6 << 30, Problems: f.problems,
		Values: map[string]float64{sensor.MemAvailablePct: 75},
	}
	if f.rps != nil {
		s.Values[state.ClientRPS] = *f.rps
	}
	maps.Copy(s.Values, f.values)
	return s, nil
}

// clock is a fake time source, advanced by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// counting wraps an Admin and counts the commands that change Varnish.
type counting struct {
	varnish.Admin
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

type rig struct {
	c      *Controller
	v      *varnishtest.Varnish
	sensor *fakeSensor
	clock  *clock
	logs   *observer.ObservedLogs
	cmds   *counting // commands sent to v (the last connection)
	cfg    *config.Config
	next   func() (*config.Config, error) // what a reload reads
}

func testConfig(v *varnishtest.Varnish) *config.Config {
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.Varnish.Targets = []config.Target{{Admin: v.AdminAddr, SecretFile: v.SecretFile}}
	cfg.Varnish.Timeout = timefmt.Duration(30 * time.Second) // VCL compiles on a busy machine
	cfg.PollInterval = 0
	cfg.Hysteresis.UpConfirm = 1
	cfg.Hysteresis.MinDwell = timefmt.Duration(time.Second)
	cfg.Hysteresis.DownWindow = timefmt.Duration(time.Second)
	cfg.FastWindow = 0
	return cfg
}

func newRig(t *testing.T, edit func(*config.Config), opts ...func(*Options)) *rig {
	t.Helper()
	return newRigOn(t, varnishtest.Start(t, varnishtest.Config{}), edit, opts...)
}

// withMetrics gives the rig's controller m.
func withMetrics(m *Metrics) func(*Options) {
	return func(o *Options) { o.Metrics = m }
}

// newRigOn is newRig driving an already running varnishd.
func newRigOn(t *testing.T, v *varnishtest.Varnish, edit func(*config.Config), opts ...func(*Options)) *rig {
	t.Helper()
	r := &rig{v: v, clock: &clock{t: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)}}
	r.sensor = &fakeSensor{now: r.clock.now}
	r.cfg = testConfig(v)
	if edit != nil {
		edit(r.cfg)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	r.logs = logs
	dial := varnish.DialAdmin(30 * time.Second)
	o := Options{
		Config: r.cfg,
		Sensor: r.sensor,
		Dial: func(addr, secret string) (varnish.Admin, error) {
			tg, err := dial(addr, secret)
			if err != nil {
				return nil, err
			}
			if addr != v.AdminAddr {
				return tg, nil
			}
			r.cmds = &counting{Admin: tg}
			return r.cmds, nil
		},
		Build:      BuildProfiles,
		LoadConfig: func() (*config.Config, error) { return r.next() },
		Logger:     zap.New(core),
		Now:        r.clock.now,
		SyncWait:   -1, // a tick returns with every target done
	}
	for _, opt := range opts {
		opt(&o)
	}
	var err error
	r.c, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.c.hooks.Close(0)
		r.c.waitIdle()
		for _, tg := range r.c.targets {
			tg.Close()
		}
	})
	return r
}

func (r *rig) tick(t *testing.T) api.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.c.Tick(ctx)
	r.clock.add(time.Second)
	return r.c.Status()
}

// vcls returns varnishd's VCLs and the active one, as varnishadm prints them.
func (r *rig) vcls(t *testing.T) (names map[string]bool, active string) {
	t.Helper()
	out, err := r.v.Adm("vcl.list")
	if err != nil {
		t.Fatal(err)
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

func (r *rig) wantActive(t *testing.T, st state.Gear) {
	t.Helper()
	want := r.c.set[st].Name
	if _, active := r.vcls(t); active != want {
		t.Fatalf("active VCL = %q, want %q (%s)", active, want, st)
	}
	s := r.c.Status()
	if s.State != st.String() || len(s.Targets) == 0 || !s.Targets[0].InSync || s.Targets[0].ActiveVCL != want {
		t.Fatalf("status = %+v, want %s in sync on %s", s, st, want)
	}
}

func (r *rig) logged(msg string) int { return r.logs.FilterMessage(msg).Len() }

func TestTickFollowsMachine(t *testing.T) {
	r := newRig(t, nil)

	if ts := r.c.Status().Targets[0]; ts.Reachable || !strings.HasPrefix(ts.Error, "not contacted yet") {
		t.Errorf("target before the first tick = %+v, want unreachable, not contacted yet", ts)
	}
	r.tick(t)
	if ts := r.c.Status().Targets[0]; !ts.Reachable || ts.Error != "" {
		t.Errorf("target after the first tick = %+v, want reachable, no error", ts)
	}
	r.wantActive(t, state.Light)
	names, _ := r.vcls(t)
	for _, p := range r.c.set {
		if !names[p.Name] {
			t.Errorf("profile %s not loaded: %v", p.Name, names)
		}
	}
	if got := r.cmds.take(); len(got) != 4 {
		t.Errorf("first contact sent %v, want 3 vcl.inline and 1 vcl.use", got)
	}

	// In sync: nothing sent.
	r.tick(t)
	if got := r.cmds.take(); len(got) != 0 {
		t.Errorf("in-sync tick sent %v, want nothing", got)
	}

	r.sensor.set(3) // 3 runnable per CPU: heavy at once (up_confirm 1)
	s := r.tick(t)
	r.wantActive(t, state.Heavy)
	if got := r.cmds.take(); len(got) != 1 || !strings.HasPrefix(got[0], "use ") {
		t.Errorf("switch sent %v, want one vcl.use", got)
	}
	if s.Targets[0].LastSwitchMS <= 0 || s.Transitions != 1 {
		t.Errorf("status after switch = %+v", s)
	}
	entries := r.logs.FilterMessage("state change").All()
	if len(entries) != 1 {
		t.Fatalf("%d state change entries, want 1", len(entries))
	}
	f := entries[0].ContextMap()
	if f["from"] != "light" || f["to"] != "heavy" || f["reason"] == "" || f["load_per_cpu"] == nil || f["switch_ms"] == nil {
		t.Errorf("state change fields = %v", f)
	}

	r.sensor.set(0.1) // quiet: one step down at a time
	r.clock.add(5 * time.Second)
	r.tick(t)
	r.wantActive(t, state.Moderate)
	r.clock.add(5 * time.Second)
	r.tick(t)
	r.wantActive(t, state.Light)

	// A failing sensor: logged, the gear held, the loop alive.
	r.sensor.mu.Lock()
	r.sensor.err = errors.New("read /proc/loadavg: input/output error")
	r.sensor.mu.Unlock()
	before := r.c.Status()
	for i := 0; i < 3; i++ {
		r.tick(t)
	}
	r.wantActive(t, state.Light)
	if s := r.c.Status(); s.Sample == nil || !s.Sample.Time.Equal(before.Sample.Time) || s.Transitions != before.Transitions {
		t.Errorf("status after sensor failures = %+v", s)
	}
	if r.logged("read sensors") != 3 {
		t.Errorf("want 3 %q entries", "read sensors")
	}
	r.sensor.mu.Lock()
	r.sensor.err = nil
	r.sensor.mu.Unlock()
	r.tick(t)
	if r.logged("sensors readable again") != 1 {
		t.Errorf("want one %q entry", "sensors readable again")
	}
}

// A failing optional source is logged with backoff, the sample is still
// decided on, and the source's recovery is logged once.
func TestTickLogsSourceProblems(t *testing.T) {
	r := newRig(t, nil)
	r.sensor.mu.Lock()
	r.sensor.problems = []sensor.Problem{{Source: "probe", Err: errors.New("probe http://127.0.0.1:8080/: connection refused")}}
	r.sensor.mu.Unlock()
	r.sensor.set(3)
	for i := 0; i < 5; i++ {
		r.tick(t)
	}
	r.wantActive(t, state.Heavy) // the machine's vitals still count
	entries := r.logs.FilterMessage("read source").All()
	if len(entries) != 4 { // failures 1, 2, 3 and 4; not 5
		t.Errorf("%d %q entries after 5 failures, want 4", len(entries), "read source")
	}
	if len(entries) > 0 {
		if f := entries[0].ContextMap(); f["source"] != "probe" || !strings.Contains(fmt.Sprint(f["error"]), "connection refused") {
			t.Errorf("read source fields = %v", f)
		}
	}
	r.sensor.mu.Lock()
	r.sensor.problems = nil
	r.sensor.mu.Unlock()
	r.tick(t)
	r.tick(t)
	recovered := r.logs.FilterMessage("source readable again").All()
	if len(recovered) != 1 || recovered[0].ContextMap()["failures"] != int64(5) {
		t.Errorf("recovery entries = %v, want one with 5 failures", recovered)
	}
}

// The traffic guard keeps the loop's gear while Varnish's traffic stays,
// whatever the load says, and lets it go once the traffic has gone.
func TestTickTrafficGuard(t *testing.T) {
	r := newRig(t, nil)
	rps := func(v float64) { r.sensor.mu.Lock(); r.sensor.rps = &v; r.sensor.mu.Unlock() }
	rps(500)
	r.sensor.set(3)
	r.tick(t)
	r.wantActive(t, state.Heavy)

	r.sensor.set(0.1) // heavy caching took the load away; the traffic is still there
	rps(480)
	for i := 0; i < 4; i++ {
		r.clock.add(5 * time.Second)
		s := r.tick(t)
		if want := "stay: client_rps 480 > 0.6 × 500 at entry"; s.Reason != want {
			t.Errorf("reason %q, want %q", s.Reason, want)
		}
	}
	r.wantActive(t, state.Heavy)

	rps(40) // the surge is over
	r.clock.add(5 * time.Second)
	r.tick(t)
	r.wantActive(t, state.Moderate)
}

func TestTickUnreachableTarget(t *testing.T) {
	dead := testenv.FreeAddr(t)
	r := newRig(t, func(cfg *config.Config) {
		cfg.Varnish.Targets = append(cfg.Varnish.Targets, config.Target{Admin: dead, SecretFile: cfg.Varnish.Targets[0].SecretFile})
	})
	s := r.tick(t)
	r.wantActive(t, state.Light)
	if len(s.Targets) != 2 || s.Targets[1].Reachable || s.Targets[1].InSync || !strings.Contains(s.Targets[1].Error, dead) {
		t.Fatalf("status of the dead target = %+v", s.Targets)
	}
	for i := 0; i < 5; i++ {
		r.clock.add(varnish.MaxBackoff)
		r.tick(t)
	}
	if n := r.logs.FilterMessage("varnish target failing").FilterField(zap.String("target", dead)).Len(); n < 2 {
		t.Errorf("%d failures logged, want the retries counted", n)
	}
	r.wantActive(t, state.Light)

	// The live target fails too, then comes back.
	r.v.Kill()
	r.clock.add(varnish.MaxBackoff)
	s = r.tick(t)
	if s.Targets[0].Reachable {
		t.Fatalf("killed varnishd reported reachable: %+v", s.Targets[0])
	}
	r.v.Restart()
	r.clock.add(varnish.MaxBackoff)
	r.tick(t)
	r.wantActive(t, state.Light)
	if r.logged("varnish reachable again") != 1 {
		t.Errorf("want one %q entry", "varnish reachable again")
	}
}

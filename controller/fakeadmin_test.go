package controller

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// stallingAdmin is an in-process fake of a Varnish admin port, for what a
// real varnishd will not do on demand: it answers vcl.list, but a
// vcl.inline gets no answer until the test sends one on answers (or the
// client hangs up).
type stallingAdmin struct {
	addr     string
	answers  chan string // a raw answer frame for one stalled vcl.inline
	inlines  atomic.Int32
	stalling atomic.Int32 // vcl.inline commands waiting for an answer now
}

func startStallingAdmin(tb testing.TB) *stallingAdmin {
	tb.Helper()
	f := &stallingAdmin{answers: make(chan string)}
	f.addr = varnishtest.StartFakeAdmin(tb, func(_ int, conn net.Conn) { f.serve(conn) }).Addr
	return f
}

func (f *stallingAdmin) serve(conn net.Conn) {
	io.WriteString(conn, varnishtest.Frame(200, "fake varnish\n"))
	rd := bufio.NewReader(conn)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		switch {
		case strings.HasPrefix(line, "vcl.list"):
			io.WriteString(conn, varnishtest.Frame(200, `[2, ["vcl.list", "-j"], 1700000000.000,
{"status": "active", "state": "auto", "temperature": "warm", "busy": 0, "name": "boot"}]`))
		case strings.HasPrefix(line, "vcl.inline"):
			f.inlines.Add(1)
			f.stalling.Add(1)
			gone := make(chan struct{})
			go func() { io.Copy(io.Discard, rd); close(gone) }()
			select {
			case a := <-f.answers:
				f.stalling.Add(-1)
				io.WriteString(conn, a)
			case <-gone:
				f.stalling.Add(-1)
			}
			return
		default:
			io.WriteString(conn, varnishtest.Frame(101, "unknown request"))
		}
	}
}

// newStallingRig is a rig with two targets: a stalling fake admin port
// first, then a real varnishd.
func newStallingRig(t *testing.T) (*rig, *stallingAdmin) {
	t.Helper()
	v := varnishtest.Start(t, varnishtest.Config{})
	slow := startStallingAdmin(t)
	r := newRigOn(t, v, func(cfg *config.Config) {
		cfg.Varnish.Targets = []config.Target{
			{Admin: slow.addr, SecretFile: v.SecretFile},
			{Admin: v.AdminAddr, SecretFile: v.SecretFile},
		}
	})
	return r, slow
}

// A target that takes long to load a profile must not hold up the others,
// and a load that timed out is not sent again at once on a fresh connection.
func TestSlowTargetDoesNotHoldUpOthers(t *testing.T) {
	r, slow := newStallingRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ticked := make(chan struct{})
	go func() { r.c.Tick(ctx); close(ticked) }()

	// The healthy target gets its gear while the slow one is still
	// compiling (30s before the loop gives up on it).
	want := r.c.set[state.Light].Name
	deadline := time.Now().Add(25 * time.Second)
	for {
		_, active := r.vcls(t)
		if active == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the healthy target was not switched to %s while the other one stalled (active %q)", want, active)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if slow.stalling.Load() != 1 {
		t.Fatalf("the healthy target was switched only after the slow one's load ended")
	}
	slow.answers <- varnishtest.Frame(106, "VCL compilation failed")
	<-ticked
	s := r.c.Status()
	if !s.Targets[1].InSync || s.Targets[1].ActiveVCL != want {
		t.Errorf("healthy target = %+v, want in sync on %s", s.Targets[1], want)
	}
	if s.Targets[0].InSync || !strings.Contains(s.Targets[0].Error, "compilation failed") {
		t.Errorf("slow target = %+v, want the load error", s.Targets[0])
	}

	t.Run("timeout not retried", func(t *testing.T) {
		r.c.targets[0].loadTimeout = 300 * time.Millisecond
		r.clock.add(maxBackoff)
		before := slow.inlines.Load()
		start := time.Now()
		r.tick(t)
		if n := slow.inlines.Load() - before; n != 1 {
			t.Errorf("vcl.inline sent %d times in one tick, want once (no retry after a timeout)", n)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("tick took %s", d)
		}
		s := r.c.Status()
		if s.Targets[0].Reachable || !strings.Contains(s.Targets[0].Error, "deadline") {
			t.Errorf("slow target = %+v, want unreachable after a timeout", s.Targets[0])
		}
		if !s.Targets[1].InSync {
			t.Errorf("healthy target = %+v, want in sync", s.Targets[1])
		}
	})
}

// droppingAdmin is a fake admin port that serves a sync (vcl.list, and
// 200 to every other command) until drop is set; then it closes each
// connection on the next command it reads, unanswered (a manager that
// goes away mid-session, again and again).
type droppingAdmin struct {
	*varnishtest.FakeAdmin
	drop atomic.Bool
}

func startDroppingAdmin(tb testing.TB) *droppingAdmin {
	tb.Helper()
	f := &droppingAdmin{}
	f.FakeAdmin = varnishtest.StartFakeAdmin(tb, func(_ int, conn net.Conn) {
		io.WriteString(conn, varnishtest.Frame(200, "fake varnish\n"))
		rd := bufio.NewReader(conn)
		for {
			line, err := rd.ReadString('\n')
			if err != nil || f.drop.Load() {
				return
			}
			if strings.HasPrefix(line, "vcl.list") {
				io.WriteString(conn, varnishtest.Frame(200, `[2, ["vcl.list", "-j"], 1700000000.000,
{"status": "active", "state": "auto", "temperature": "warm", "busy": 0, "name": "boot"}]`))
				continue
			}
			io.WriteString(conn, varnishtest.Frame(200, ""))
		}
	})
	return f
}

// Reconnecting lives in one layer: a connection the peer closed is dialled
// again once, by the admin client, and a target that keeps failing costs
// one dial per retry, never one per layer.
func TestOneDialPerRetry(t *testing.T) {
	fake := startDroppingAdmin(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("unused by the fake\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.Varnish.Targets = []config.Target{{Admin: fake.Addr, SecretFile: secret}}
	cfg.PollInterval = 0
	clk := &clock{t: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}
	core, logs := observer.New(zapcore.InfoLevel)
	c, err := New(Options{
		Config: cfg, Sensor: &fakeSensor{now: clk.now}, Dial: DialAdmin(5 * time.Second), Build: BuildProfiles,
		Logger: zap.New(core), Now: clk.now, SyncWait: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.waitIdle()
		for _, tg := range c.targets {
			tg.close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := func() api.TargetStatus {
		t.Helper()
		c.Tick(ctx)
		return c.Status().Targets[0]
	}

	if st := tick(); !st.InSync {
		t.Fatalf("first contact: %+v, want in sync", st)
	}
	if n := fake.Accepted(); n != 1 {
		t.Fatalf("first contact dialled %d times, want once", n)
	}

	fake.drop.Store(true)
	clk.add(time.Second)
	if st := tick(); st.Reachable || st.InSync {
		t.Fatalf("after the drop: %+v, want unreachable", st)
	}
	// The session the peer closed is dialled again once (the client's
	// retry); that one is closed too, and nothing dials a third.
	if n := fake.Accepted(); n != 2 {
		t.Errorf("the poll after the drop dialled %d times, want once", n-1)
	}
	for i := 0; i < 3; i++ {
		before := fake.Accepted()
		clk.add(maxBackoff)
		tick()
		if n := fake.Accepted() - before; n != 1 {
			t.Errorf("retry %d dialled %d times, want once", i+1, n)
		}
	}

	fake.drop.Store(false)
	clk.add(maxBackoff)
	if st := tick(); !st.Reachable || !st.InSync {
		t.Fatalf("after the port came back: %+v, want in sync", st)
	}
	again := logs.FilterMessage("varnish reachable again").All()
	if len(again) != 1 || again[0].ContextMap()["failures"] != int64(4) {
		t.Errorf("want one %q with failures 4, got %v", "varnish reachable again", again)
	}
	if n := logs.FilterMessage("active VCL changed outside gearshift").Len(); n != 0 {
		t.Errorf("a re-dialled session was reported as a foreign change %d times", n)
	}
}

// While one target stalls on a profile load, the loop goes on: the healthy
// target's status is published, and a force is answered and applied to
// it without waiting for the stalled one.
func TestLoopServesWhileTargetStalls(t *testing.T) {
	r, slow := newStallingRig(t)
	r.c.opts.SyncWait = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	r.c.Tick(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the tick waited %s for a stalled target", d)
	}
	done := make(chan error, 1)
	go func() { done <- r.c.Run(ctx) }() // no ticker: requests and finished syncs only

	light := r.c.set[state.Light].Name
	for deadline := time.Now().Add(25 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s := r.c.Status(); s.Targets[1].InSync && s.Targets[1].ActiveVCL == light {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the healthy target never showed in sync: %+v", r.c.Status().Targets[1])
		}
	}
	if slow.stalling.Load() != 1 {
		t.Fatal("the slow target stopped stalling early")
	}

	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	s, err := r.c.Force(fctx, state.Heavy, time.Time{})
	fcancel()
	if err != nil {
		t.Fatalf("force while a target stalls: %v", err)
	}
	heavy := r.c.set[state.Heavy].Name
	if !s.Targets[1].InSync || s.Targets[1].ActiveVCL != heavy {
		t.Errorf("healthy target after force = %+v, want in sync on %s", s.Targets[1], heavy)
	}
	if s.Targets[0].InSync || s.Targets[0].Error == "" {
		t.Errorf("stalled target after force = %+v, want not in sync, with a reason", s.Targets[0])
	}
	if _, active := r.vcls(t); active != heavy {
		t.Errorf("varnishd runs %s, want %s", active, heavy)
	}
	if slow.stalling.Load() != 1 {
		t.Fatal("the force waited for the stalled target")
	}

	slow.answers <- varnishtest.Frame(106, "VCL compilation failed")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s := r.c.Status(); strings.Contains(s.Targets[0].Error, "compilation failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stalled target's failure was never published: %+v", r.c.Status().Targets[0])
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A port that refuses connections (a manager being restarted) is retried
// once a poll, not after a backoff grown to maxBackoff.
func TestBackoffCappedForRefusedConnections(t *testing.T) {
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.PollInterval = timefmt.Duration(2 * time.Second)
	cfg.Varnish.Targets = []config.Target{{Admin: testenv.FreeAddr(t), SecretFile: "/nonexistent"}}
	c := &Controller{log: zap.NewNop(), opts: Options{Dial: func(string, string) (Target, error) { return nil, nil }}}
	tgs, _ := c.makeTargets(cfg, nil)
	tg := tgs[0]
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	refused := fmt.Errorf("connect: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	for i := 0; i < 10; i++ {
		tg.fail(now, refused)
	}
	if tg.backoff != 2*time.Second {
		t.Errorf("backoff after 10 refused connections = %s, want the poll interval 2s", tg.backoff)
	}
	// Anything else (a timeout, a hung port) still backs off to the cap.
	timeout := fmt.Errorf("connect: %w", os.ErrDeadlineExceeded)
	for i := 0; i < 10; i++ {
		tg.fail(now, timeout)
	}
	if tg.backoff != maxBackoff {
		t.Errorf("backoff after 10 timeouts = %s, want %s", tg.backoff, maxBackoff)
	}
}

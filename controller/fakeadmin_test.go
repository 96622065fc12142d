package controller

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
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
		slowest := r.c.targets[0].Settings()
		slowest.LoadTimeout = 300 * time.Millisecond
		r.c.targets[0].Configure(slowest)
		r.clock.add(varnish.MaxBackoff)
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
	s, err := r.c.Force(fctx, "", state.Heavy, time.Time{})
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

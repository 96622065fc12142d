package varnish

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// childLosing kills the real cache child when an armed vcl.use comes, and
// answers it as the manager does whose child died while it passed the
// command on (Varnish 7.1, a kill -9 as vcl.use is sent): status 400,
// "CLI communication error", and the command did nothing. That moment is
// too short to hit on demand; what follows (the manager's new child) is
// real.
type childLosing struct {
	Admin
	v      *varnishtest.Varnish
	armed  atomic.Bool
	killed atomic.Int64 // the pid of the child it killed
}

func (c *childLosing) VCLUse(ctx context.Context, name string) error {
	if c.armed.CompareAndSwap(true, false) {
		if pid := c.v.CacheChild(); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
			c.killed.Store(int64(pid))
		}
		return &varnishadm.CLIError{Status: 400, Text: "CLI communication error (hdr)"}
	}
	return c.Admin.VCLUse(ctx, name)
}

// TestShiftAfterChildLost: a shift whose vcl.use met a dying cache child
// reaches the manager's new child at the next poll, not after a backoff:
// the manager answered, and its new child runs at once.
func TestShiftAfterChildLost(t *testing.T) {
	const poll = 100 * time.Millisecond
	v := varnishtest.Start(t, varnishtest.Config{})
	var losing *childLosing
	r := newRigOn(t, v, nil)
	r.wrap = func(a Admin) Admin {
		losing = &childLosing{Admin: a, v: v}
		return losing
	}
	r.sync(t, state.Light)
	r.wantActive(t, state.Light)

	losing.armed.Store(true)
	r.sync(t, state.Heavy)
	if ts := r.status(state.Heavy); ts.InSync || losing.armed.Load() {
		t.Fatalf("the vcl.use that lost the child did not fail the target: %+v", ts)
	}
	// The manager starts a new child: the shift waits for it.
	killed := int(losing.killed.Load())
	if killed == 0 {
		t.Fatal("no cache child to kill")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, err := v.Adm("status")
		if child := v.CacheChild(); err == nil && strings.Contains(out, "running") && child != 0 && child != killed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("varnishd's manager did not start a new cache child within 30s:\n%s", v.Log())
		}
	}

	r.now = r.now.Add(poll - time.Second) // the next poll: sync moved the time on by a second
	r.sync(t, state.Heavy)
	r.wantActive(t, state.Heavy)
	if ts := r.status(state.Heavy); !ts.InSync || ts.Error != "" {
		t.Errorf("target one poll after the child came back = %+v, want in sync", ts)
	}
}

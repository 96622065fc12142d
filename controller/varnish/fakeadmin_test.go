package varnish

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

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// bootList is the answer of a fake admin port to vcl.list: boot, active.
const bootList = `[2, ["vcl.list", "-j"], 1700000000.000,
{"status": "active", "state": "auto", "temperature": "warm", "busy": 0, "name": "boot"}]`

// droppingAdmin is a fake admin port that serves a sync (vcl.list, and
// 200 to every other command) until drop is set; then it closes each
// connection on the next command it reads, unanswered (a manager that
// goes away mid-session, again and again). A ban is dropped while
// dropBans is above 0, which each drop counts down.
type droppingAdmin struct {
	*varnishtest.FakeAdmin
	drop     atomic.Bool
	dropBans atomic.Int32
	bans     atomic.Int32 // ban commands read
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
			if strings.HasPrefix(line, "ban ") {
				f.bans.Add(1)
				if f.dropBans.Add(-1) >= 0 {
					return
				}
			}
			if strings.HasPrefix(line, "vcl.list") {
				io.WriteString(conn, varnishtest.Frame(200, bootList))
				continue
			}
			io.WriteString(conn, varnishtest.Frame(200, ""))
		}
	})
	return f
}

// newFakeTarget is a Target on the fake admin port addr, logging to logs.
func newFakeTarget(tb testing.TB, addr string) (*Target, *profiles.Set, *observer.ObservedLogs) {
	tb.Helper()
	secret := filepath.Join(tb.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("unused by the fake\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.Varnish.Targets = []config.Target{{Admin: addr, SecretFile: secret}}
	set, err := profiles.Build(cfg.Site())
	if err != nil {
		tb.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	tg := New(addr, secret, DialAdmin(5*time.Second), SettingsOf(cfg), noMetrics(), zap.New(core))
	tb.Cleanup(tg.Close)
	return tg, &set, logs
}

// Reconnecting lives in one layer: a connection the peer closed is dialled
// again once, by the admin client, and a target that keeps failing costs
// one dial per retry, never one per layer.
func TestOneDialPerRetry(t *testing.T) {
	fake := startDroppingAdmin(t)
	tg, set, logs := newFakeTarget(t, fake.Addr)
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sync := func() {
		tg.Sync(ctx, now, set, state.Light)
	}
	status := func() (reachable, inSync bool) {
		st := tg.Status(set[state.Light])
		return st.Reachable, st.InSync
	}

	sync()
	if _, inSync := status(); !inSync {
		t.Fatalf("first contact: %+v, want in sync", tg.Status(set[state.Light]))
	}
	if n := fake.Accepted(); n != 1 {
		t.Fatalf("first contact dialled %d times, want once", n)
	}

	fake.drop.Store(true)
	now = now.Add(time.Second)
	sync()
	if reachable, inSync := status(); reachable || inSync {
		t.Fatalf("after the drop: %+v, want unreachable", tg.Status(set[state.Light]))
	}
	// The session the peer closed is dialled again once (the client's
	// retry); that one is closed too, and nothing dials a third.
	if n := fake.Accepted(); n != 2 {
		t.Errorf("the poll after the drop dialled %d times, want once", n-1)
	}
	for i := 0; i < 3; i++ {
		before := fake.Accepted()
		now = now.Add(MaxBackoff)
		sync()
		if n := fake.Accepted() - before; n != 1 {
			t.Errorf("retry %d dialled %d times, want once", i+1, n)
		}
	}

	fake.drop.Store(false)
	now = now.Add(MaxBackoff)
	sync()
	if reachable, inSync := status(); !reachable || !inSync {
		t.Fatalf("after the port came back: %+v, want in sync", tg.Status(set[state.Light]))
	}
	again := logs.FilterMessage("varnish reachable again").All()
	if len(again) != 1 || again[0].ContextMap()["failures"] != int64(4) {
		t.Errorf("want one %q with failures 4, got %v", "varnish reachable again", again)
	}
	if n := logs.FilterMessage("active VCL changed outside gearshift").Len(); n != 0 {
		t.Errorf("a re-dialled session was reported as a foreign change %d times", n)
	}
}

// A ban goes through the target's own session, and is sent once more when
// the connection broke under it: a broken connection, the client's own
// resend on a fresh one broken too, then the target's retry.
func TestBanOnTheTargetsSession(t *testing.T) {
	fake := startDroppingAdmin(t)
	tg, set, _ := newFakeTarget(t, fake.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tg.Ban(ctx, "obj.http.X-Gs-Guest", "==", "1"); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("a ban before any sync = %v, want not connected", err)
	}
	tg.Sync(ctx, time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), set, state.Light)
	if err := tg.Ban(ctx, "obj.http.X-Gs-Guest", "==", "1"); err != nil {
		t.Fatal(err)
	}
	if n, bans := fake.Accepted(), fake.bans.Load(); n != 1 || bans != 1 {
		t.Errorf("a ban on a healthy session dialled %d times in all and sent %d bans, want 1 and 1", n, bans)
	}

	fake.dropBans.Store(2)
	if err := tg.Ban(ctx, "obj.http.X-Gs-Guest", "==", "1"); err != nil {
		t.Fatalf("a ban whose first try broke: %v, want it sent again", err)
	}
	if bans := fake.bans.Load() - 1; bans != 3 {
		t.Errorf("sent the ban %d times, want 3 (the client's resend, then the target's retry)", bans)
	}
}

// A port that refuses connections (a manager being restarted) is retried
// once a poll, not after a backoff grown to MaxBackoff.
func TestBackoffCappedForRefusedConnections(t *testing.T) {
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	cfg.PollInterval = timefmt.Duration(2 * time.Second)
	tg := New(testenv.FreeAddr(t), "/nonexistent", func(string, string) (Admin, error) { return nil, nil },
		SettingsOf(cfg), noMetrics(), zap.NewNop())
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	refused := fmt.Errorf("connect: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	for i := 0; i < 10; i++ {
		tg.Fail(now, refused)
	}
	if tg.backoff != 2*time.Second {
		t.Errorf("backoff after 10 refused connections = %s, want the poll interval 2s", tg.backoff)
	}
	// Anything else (a timeout, a hung port) still backs off to the cap.
	timeout := fmt.Errorf("connect: %w", os.ErrDeadlineExceeded)
	for i := 0; i < 10; i++ {
		tg.Fail(now, timeout)
	}
	if tg.backoff != MaxBackoff {
		t.Errorf("backoff after 10 timeouts = %s, want %s", tg.backoff, MaxBackoff)
	}
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// fakeSites are the sites of fakeAPI's config.
var fakeSites = []string{"default", "shop"}

// fakeAPI records what the handler asked for.
type fakeAPI struct {
	forced    *state.Gear
	until     time.Time
	site      string // the site of the last Force or Auto ("" every site)
	autos     int
	reloadErr error
	block     chan struct{} // when set, Force waits for it (a busy loop)
	targets   []TargetStatus
}

func (f *fakeAPI) Status() Status {
	s := Status{Version: "0.0.0-test", State: "light", Mode: "auto", Targets: f.targets}
	for _, name := range fakeSites {
		s.Sites = append(s.Sites, SiteStatus{Name: name, Hosts: []string{}, Gear: "light", Mode: "auto"})
	}
	if f.forced != nil {
		for i := range s.Sites {
			if f.site == "" || f.site == s.Sites[i].Name {
				s.Sites[i].Gear, s.Sites[i].Mode = f.forced.String(), "forced"
			}
		}
	}
	return s
}

func (f *fakeAPI) knows(site string) error {
	if site != "" && !slices.Contains(fakeSites, site) {
		return &UnknownSiteError{Site: site}
	}
	return nil
}

func (f *fakeAPI) Force(ctx context.Context, site string, st state.Gear, until time.Time) (Status, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return Status{}, ctx.Err()
		}
	}
	if err := f.knows(site); err != nil {
		return Status{}, err
	}
	f.forced, f.until, f.site = &st, until, site
	s := f.Status()
	s.State, s.Mode = st.String(), "forced"
	if !until.IsZero() {
		s.ForcedUntil = &until
	}
	return s, nil
}

func (f *fakeAPI) Auto(_ context.Context, site string) (Status, error) {
	if err := f.knows(site); err != nil {
		return Status{}, err
	}
	f.autos, f.site, f.forced = f.autos+1, site, nil
	return f.Status(), nil
}

func (f *fakeAPI) Reload(context.Context) (Status, error) {
	s := f.Status()
	if f.reloadErr != nil {
		s.ConfigError = f.reloadErr.Error()
	}
	return s, f.reloadErr
}

func TestHandler(t *testing.T) {
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name, method, path, body string
		code                     int
		errHas                   string
		check                    func(t *testing.T, f *fakeAPI)
	}{
		{name: "status", method: "GET", path: "/v1/status", code: 200},
		{name: "status HEAD", method: "HEAD", path: "/v1/status", code: 200},
		{name: "status POST", method: "POST", path: "/v1/status", code: 405, errHas: "use GET"},
		{name: "force GET", method: "GET", path: "/v1/force", code: 405, errHas: "use POST"},
		{name: "unknown path", method: "GET", path: "/v2/status", code: 404, errHas: "no such endpoint"},
		{name: "double slash", method: "GET", path: "/v1//status", code: 404, errHas: "no such endpoint"},
		{name: "dot dot", method: "POST", path: "/v1/../v1/force", body: `{"state":"heavy"}`, code: 404, errHas: "no such endpoint"},
		{name: "dot", method: "GET", path: "/v1/./status", code: 404, errHas: "no such endpoint"},
		{name: "trailing slash", method: "GET", path: "/v1/status/", code: 404, errHas: "no such endpoint"},
		{name: "escaped slash", method: "GET", path: "/v1%2Fstatus", code: 404, errHas: "no such endpoint"},
		{name: "force", method: "POST", path: "/v1/force", body: `{"state":"heavy","for":"30m"}`, code: 200,
			check: func(t *testing.T, f *fakeAPI) {
				if f.forced == nil || *f.forced != state.Heavy || !f.until.Equal(now.Add(30*time.Minute)) {
					t.Errorf("forced %v until %v", f.forced, f.until)
				}
			}},
		{name: "force until auto", method: "POST", path: "/v1/force", body: `{"state":"light"}`, code: 200,
			check: func(t *testing.T, f *fakeAPI) {
				if f.forced == nil || *f.forced != state.Light || !f.until.IsZero() {
					t.Errorf("forced %v until %v", f.forced, f.until)
				}
			}},
		{name: "force zero duration", method: "POST", path: "/v1/force", body: `{"state":"moderate","for":"0s"}`, code: 200},
		{name: "bad json", method: "POST", path: "/v1/force", body: `{"state":`, code: 400, errHas: "bad request body"},
		{name: "empty body", method: "POST", path: "/v1/force", body: ``, code: 400, errHas: "bad request body"},
		{name: "not an object", method: "POST", path: "/v1/force", body: `["heavy"]`, code: 400, errHas: "bad request body"},
		{name: "unknown field", method: "POST", path: "/v1/force", body: `{"state":"heavy","until":"5m"}`, code: 400, errHas: "unknown field"},
		{name: "trailing data", method: "POST", path: "/v1/force", body: `{"state":"heavy"} {}`, code: 400, errHas: "trailing"},
		{name: "unknown state", method: "POST", path: "/v1/force", body: `{"state":"turbo"}`, code: 400, errHas: "unknown state"},
		{name: "missing state", method: "POST", path: "/v1/force", body: `{}`, code: 400, errHas: "unknown state"},
		{name: "negative duration", method: "POST", path: "/v1/force", body: `{"state":"heavy","for":"-5m"}`, code: 400, errHas: "negative"},
		{name: "absurd duration", method: "POST", path: "/v1/force", body: `{"state":"heavy","for":"8760h"}`, code: 400, errHas: "at most"},
		{name: "not a duration", method: "POST", path: "/v1/force", body: `{"state":"heavy","for":"soon"}`, code: 400, errHas: "bad duration"},
		{name: "duration as number", method: "POST", path: "/v1/force", body: `{"state":"heavy","for":30}`, code: 400, errHas: "bad request body"},
		{name: "force a site", method: "POST", path: "/v1/force", body: `{"state":"heavy","site":"shop"}`, code: 200,
			check: func(t *testing.T, f *fakeAPI) {
				if f.forced == nil || *f.forced != state.Heavy || f.site != "shop" {
					t.Errorf("forced %v on site %q", f.forced, f.site)
				}
			}},
		{name: "force an unknown site", method: "POST", path: "/v1/force", body: `{"state":"heavy","site":"nosuch"}`, code: 404, errHas: `no site "nosuch"`,
			check: func(t *testing.T, f *fakeAPI) {
				if f.forced != nil {
					t.Errorf("forced %v", *f.forced)
				}
			}},
		{name: "force a site as a number", method: "POST", path: "/v1/force", body: `{"state":"heavy","site":7}`, code: 400, errHas: "bad request body"},
		{name: "auto", method: "POST", path: "/v1/auto", code: 200,
			check: func(t *testing.T, f *fakeAPI) {
				if f.autos != 1 || f.site != "" {
					t.Errorf("autos = %d, site %q; want every pin released", f.autos, f.site)
				}
			}},
		{name: "auto empty object", method: "POST", path: "/v1/auto", body: `{}`, code: 200,
			check: func(t *testing.T, f *fakeAPI) {
				if f.autos != 1 || f.site != "" {
					t.Errorf("autos = %d, site %q; want every pin released", f.autos, f.site)
				}
			}},
		{name: "auto a site", method: "POST", path: "/v1/auto", body: `{"site":"shop"}`, code: 200,
			check: func(t *testing.T, f *fakeAPI) {
				if f.autos != 1 || f.site != "shop" {
					t.Errorf("autos = %d, site %q", f.autos, f.site)
				}
			}},
		{name: "auto an unknown site", method: "POST", path: "/v1/auto", body: `{"site":"nosuch"}`, code: 404, errHas: `no site "nosuch"`},
		{name: "auto bad json", method: "POST", path: "/v1/auto", body: `{"site":`, code: 400, errHas: "bad request body"},
		{name: "auto not an object", method: "POST", path: "/v1/auto", body: `"shop"`, code: 400, errHas: "bad request body"},
		{name: "auto unknown field", method: "POST", path: "/v1/auto", body: `{"state":"light"}`, code: 400, errHas: "unknown field"},
		{name: "auto trailing data", method: "POST", path: "/v1/auto", body: `{"site":"shop"} {}`, code: 400, errHas: "trailing"},
		{name: "reload", method: "POST", path: "/v1/reload", code: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAPI{}
			h := NewHandler(f, func() time.Time { return now })
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Fatalf("code = %d, want %d; body %s", rec.Code, tc.code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if tc.method == "HEAD" {
				return
			}
			if tc.code/100 == 2 {
				var s Status
				if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || s.Version == "" {
					t.Errorf("body %s: %v", rec.Body, err)
				}
			} else {
				var e errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.errHas) {
					t.Errorf("error body %s, want an error containing %q", rec.Body, tc.errHas)
				}
			}
			if tc.check != nil {
				tc.check(t, f)
			} else if tc.code/100 != 2 && (f.forced != nil || f.autos != 0) {
				t.Errorf("refused, yet forced %v, autos %d", f.forced, f.autos)
			}
		})
	}
}

func TestHandlerReloadError(t *testing.T) {
	f := &fakeAPI{reloadErr: errors.New("reload config: poll_interval: must be > 0")}
	rec := httptest.NewRecorder()
	NewHandler(f, nil).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/reload", nil))
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "poll_interval") {
		t.Fatalf("reload error: %d %s", rec.Code, rec.Body)
	}
}

func serveSocket(t *testing.T, api API) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "gearshift.sock") // run/ does not exist yet
	ln, err := ListenSocket(path, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, api, Access{adminGID: -1}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return path
}

func TestClientOverSocket(t *testing.T) {
	f := &fakeAPI{}
	path := serveSocket(t, f)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode = %v, want socket 0660", fi.Mode())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o755 {
		t.Errorf("socket dir mode = %v, want 0755", di.Mode().Perm())
	}

	ctx := context.Background()
	c := NewClient(path)
	s, err := c.Status(ctx)
	if err != nil || s.State != "light" {
		t.Fatalf("Status = %+v, %v", s, err)
	}
	s, err = c.Force(ctx, "", state.Heavy, 30*time.Minute)
	if err != nil || s.State != "heavy" || s.Mode != "forced" || s.ForcedUntil == nil {
		t.Fatalf("Force = %+v, %v", s, err)
	}
	if _, err := c.Auto(ctx, ""); err != nil || f.autos != 1 {
		t.Fatalf("Auto: %v (autos %d)", err, f.autos)
	}
	s, err = c.Force(ctx, "shop", state.Moderate, 0)
	if shop, _ := s.Site("shop"); err != nil || f.site != "shop" || shop.Gear != "moderate" || shop.Mode != "forced" {
		t.Fatalf("Force shop = %+v, %v (site %q)", s, err, f.site)
	}
	site, err := c.SiteStatus(ctx, "shop")
	if err != nil || site.Name != "shop" || site.Gear != "moderate" {
		t.Fatalf("SiteStatus shop = %+v, %v", site, err)
	}
	if _, err := c.Auto(ctx, "shop"); err != nil || f.autos != 2 || f.site != "shop" {
		t.Fatalf("Auto shop: %v (autos %d, site %q)", err, f.autos, f.site)
	}
	for name, call := range map[string]func() error{
		"Force":      func() error { _, err := c.Force(ctx, "nosuch", state.Heavy, 0); return err },
		"Auto":       func() error { _, err := c.Auto(ctx, "nosuch"); return err },
		"SiteStatus": func() error { _, err := c.SiteStatus(ctx, "nosuch"); return err },
	} {
		var ae *APIError
		if err := call(); !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Message != `no site "nosuch" in the config (gearshift sites lists them)` {
			t.Errorf("%s of an unknown site = %v, want a 404 with the daemon's message", name, err)
		}
	}
	f.reloadErr = errors.New("profiles.heavy.vcl_file: no such file")
	_, err = c.Reload(ctx)
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 422 || !strings.Contains(ae.Message, "vcl_file") {
		t.Fatalf("Reload error = %v", err)
	}

	t.Run("second daemon refused", func(t *testing.T) {
		if _, err := ListenSocket(path, ""); err == nil || !strings.Contains(err.Error(), "another gearshift") {
			t.Fatalf("ListenSocket on a live socket = %v", err)
		}
	})
}

func TestListenSocketRemovesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gearshift.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // a dead daemon's socket file stays behind
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	ln, err := ListenSocket(path, "")
	if err != nil {
		t.Fatalf("ListenSocket over a stale socket: %v", err)
	}
	ln.Close()

	regular := filepath.Join(t.TempDir(), "not-a-socket")
	os.WriteFile(regular, nil, 0o644)
	if _, err := ListenSocket(regular, ""); err == nil {
		t.Error("ListenSocket replaced a regular file")
	}
	if _, err := ListenSocket(filepath.Join(t.TempDir(), "s.sock"), "no-such-group-gearshift"); err == nil ||
		!strings.Contains(err.Error(), "control.group") {
		t.Errorf("unknown group: %v", err)
	}
}

func TestClientUnreachable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone.sock")
	_, err := NewClient(path).Status(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want ErrUnreachable naming %s", err, path)
	}
	if strings.Contains(err.Error(), "http://") {
		t.Errorf("err names a URL: %v", err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err %v does not wrap the cause", err)
	}
}

// A daemon that takes the request but answers late is busy, not gone.
func TestClientNoAnswer(t *testing.T) {
	f := &fakeAPI{block: make(chan struct{})}
	path := serveSocket(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := NewClient(path).Force(ctx, "", state.Heavy, 0)
	if !errors.Is(err, ErrNoAnswer) || errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrNoAnswer and not ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), "within 300ms") || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want the wait and the socket named", err)
	}
}

// The socket's directory lets control.group through whatever the umask
// (a detached daemon runs under 027), and one the admin made is kept.
func TestListenSocketDirUnderUmask(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "run", "gearshift", "gearshift.sock")
	old := syscall.Umask(0o027)
	ln, err := ListenSocket(path, "")
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, d := range []string{filepath.Join(base, "run"), filepath.Dir(path)} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v; want 0755", d, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket: %v, %v; want 0660", fi.Mode(), err)
	}

	own := filepath.Join(base, "private")
	os.Mkdir(own, 0o700)
	ln2, err := ListenSocket(filepath.Join(own, "gearshift.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	ln2.Close()
	if fi, _ := os.Stat(own); fi.Mode().Perm() != 0o700 {
		t.Errorf("an existing directory was changed to %v", fi.Mode().Perm())
	}
}

func TestListenSocketGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to a group needs root")
	}
	path := filepath.Join(t.TempDir(), "gearshift.sock")
	ln, err := ListenSocket(path, "root")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Gid != 0 {
		t.Errorf("socket group %d, want root (0)", st.Gid)
	}
}

// Neither the control socket nor the metrics listener keeps a connection
// that sits idle, or one that never finishes its request.
func TestServersCloseIdleConnections(t *testing.T) {
	short := serverTimeouts{readHeader: 200 * time.Millisecond, read: 200 * time.Millisecond, write: time.Second, idle: 200 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		network string
		serve   func(context.Context, net.Listener) error
	}{
		{"control", "unix", func(ctx context.Context, ln net.Listener) error {
			return serve(ctx, ln, &fakeAPI{}, Access{adminGID: -1}, short)
		}},
		{"metrics", "tcp", func(ctx context.Context, ln net.Listener) error {
			return serveHTTP(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "gearshift_up 1\n") }), short)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if tc.network == "unix" {
				addr = filepath.Join(t.TempDir(), "s.sock")
			}
			ln, err := net.Listen(tc.network, addr)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tc.serve(ctx, ln) }()
			defer func() { cancel(); <-done }()

			for _, req := range []string{
				"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n", // answered, then idle
				"GET /v1/status HTTP/1.1\r\nHost: x\r\n",     // never finished
			} {
				conn, err := net.Dial(tc.network, ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(5 * time.Second)) // the test's own bound
				if _, err := io.WriteString(conn, req); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				_, err = io.Copy(io.Discard, conn) // returns when the server closes
				if err != nil {
					t.Errorf("%q: connection not closed by the server: %v", req, err)
				} else if d := time.Since(start); d > 3*time.Second {
					t.Errorf("%q: closed after %s", req, d)
				}
			}
		})
	}
}

// The socket's group is set on the path itself, never through a symlink
// that replaced it.
func TestChownGroupDoesNotFollowSymlinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, nil, 0o600)
	link := filepath.Join(dir, "gearshift.sock")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := chownGroup(link, 65534); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != 0 {
		t.Errorf("the symlink's target got group %d", gid)
	}
	li, _ := os.Lstat(link)
	if gid := li.Sys().(*syscall.Stat_t).Gid; gid != 65534 {
		t.Errorf("the link has group %d, want 65534", gid)
	}
}

// TestClientReadsTheLargestStatus: the status of as many targets as a
// config may have (config.MaxTargets), each down with a long error, is
// read by the client whole (status, check and force all read it).
func TestClientReadsTheLargestStatus(t *testing.T) {
	f := &fakeAPI{}
	long := strings.Repeat("VCC-compiler failed: Symbol not found: 'x' ", 48)
	for i := range config.MaxTargets {
		f.targets = append(f.targets, TargetStatus{Admin: fmt.Sprintf("192.0.2.%d:%d", i%250, 6082+i), ActiveVCL: "gearshift-heavy-0123456789abcdef", Error: long})
	}
	path := serveSocket(t, f)
	c := NewClient(path)
	s, err := c.Status(context.Background())
	if err != nil {
		t.Fatalf("Status of %d targets: %v", config.MaxTargets, err)
	}
	if len(s.Targets) != config.MaxTargets || s.Targets[config.MaxTargets-1].Error != long {
		t.Fatalf("Status has %d targets", len(s.Targets))
	}
	s, err = c.Force(context.Background(), "", state.Heavy, 0)
	if err != nil || len(s.Targets) != config.MaxTargets {
		t.Fatalf("Force: %v", err)
	}
}

// TestClientRefusesAnOversizedAnswer: an answer beyond the client's cap is
// a clear error, not memory without bound.
func TestClientRefusesAnOversizedAnswer(t *testing.T) {
	defer func(n int64) { maxAnswer = n }(maxAnswer)
	maxAnswer = 4 << 10
	f := &fakeAPI{}
	for i := range 100 {
		f.targets = append(f.targets, TargetStatus{Admin: fmt.Sprintf("127.0.0.1:%d", 7000+i), Error: strings.Repeat("x", 100)})
	}
	_, err := NewClient(serveSocket(t, f)).Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "answer is larger than 4 KiB") {
		t.Fatalf("Status = %v, want the size named", err)
	}
}

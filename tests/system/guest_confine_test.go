package system

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
	"gopkg.in/yaml.v3"
)

// sessionBackend is a site that gives every visitor a session on every
// page, as PHP's session_start() does: what heavy asks the daemon for.
// seen returns a copy of the requests it got so far ("URI Host=HOST").
func sessionBackend(t *testing.T) (srv *httptest.Server, n *atomic.Int64, seen func() []string) {
	t.Helper()
	n = new(atomic.Int64)
	var (
		mu  sync.Mutex
		got []string
	)
	seen = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		mu.Lock()
		got = append(got, r.RequestURI+" Host="+r.Host)
		mu.Unlock()
		sid := make([]byte, 16)
		rand.Read(sid)
		http.SetCookie(w, &http.Cookie{Name: "PHPSESSID", Value: hex.EncodeToString(sid), Path: "/"})
		w.Header().Set("Cache-Control", "no-store, no-cache, must-revalidate")
		io.WriteString(w, "<p>The same article for every visitor.</p>\n")
	}))
	t.Cleanup(srv.Close)
	return srv, n, seen
}

// rawStatus sends one request line (a target as a visitor wrote it) to
// v and returns the status Varnish answered with.
func rawStatus(t *testing.T, v *varnishtest.Varnish, target string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", v.HTTPAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %.60q: %v", target, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestRequestTargetsConfined drives the request-targets of an attacker
// who wants the daemon (heavy's guest fetcher, root) to connect somewhere
// else, against a real varnishd and daemon in heavy: a private service on
// another loopback address receives nothing, every target that does not
// start with "/" gets 400 from Varnish and leaves no object in the cache,
// and an absolute-form http target becomes its path at the backend.
func TestRequestTargetsConfined(t *testing.T) {
	srv, _, seen := sessionBackend(t)
	var private atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.7:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		private.Add(1)
		io.WriteString(w, "internal secret\n")
	})}
	go secret.Serve(ln)
	t.Cleanup(func() { secret.Close() })
	at := ln.Addr().String()

	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Backend = profiles.BackendAt("127.0.0.1", srv.Listener.Addr().(*net.TCPAddr).Port)
	})
	if _, errOut, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}
	objects := func() int { return v.Counter(t, "MAIN.n_object") }
	before := objects()
	for _, target := range []string{
		"x:@" + at + "/internal/secret",
		"x:@" + at + "/internal/secret",
		"x:@" + at + "/internal/secret",
		"@" + at + "/internal/secret",
		"x:@[::1]:9/",
		"ftp://" + at + "/internal/secret",
		"http://user@" + at + "/internal/secret",
		"http://" + at + "@evil/",
		"x:/wp-admin/",
		"*",
		"evil:1/",
		strings.Repeat("a", 4096),
	} {
		if got := rawStatus(t, v, target); got != http.StatusBadRequest {
			t.Errorf("GET %.60q: status %d, want 400 from Varnish", target, got)
		}
	}
	if after := objects(); after != before {
		t.Errorf("the refused targets changed the cache: %d objects before, %d after", before, after)
	}
	// An absolute-form target is its path, its authority the Host; a path
	// that starts with "//" is a path. Both reach the backend alone.
	for _, tc := range []struct{ target, want string }{
		{"http://" + at + "/internal/secret", "/internal/secret Host=" + at},
		{"HTTPS://evil:1/", "/ Host=evil:1"},
		{"//" + at + "/internal/secret", "//" + at + "/internal/secret Host=127.0.0.1"},
	} {
		if got := rawStatus(t, v, tc.target); got != http.StatusOK {
			t.Errorf("GET %q: status %d, want the backend's 200", tc.target, got)
		}
		if got := seen(); !slices.Contains(got, tc.want) {
			t.Errorf("GET %q: the backend never got %q; it got %q", tc.target, tc.want, got)
		}
	}
	if n := private.Load(); n != 0 {
		t.Errorf("the private service at %s got %d requests, want none", at, n)
	}
}

// startImpostor listens on a free loopback port and answers every ask as
// heavy's daemon would, echoing whatever it was sent (a secret among it),
// counting the asks in asked; it stops with the test, or at Close.
func startImpostor(t *testing.T, asked *atomic.Int64) (net.Listener, *http.Server) {
	t.Helper()
	imp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	impostor := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		for name, vs := range r.Header {
			w.Header()[name] = vs
		}
		w.Header().Set("X-Gs-Guest", "shared")
		io.WriteString(w, "IMPOSTOR\n")
	})}
	go impostor.Serve(imp)
	t.Cleanup(func() { impostor.Close() })
	return imp, impostor
}

// TestGuestImpostor: a process holds guest_listen before the daemon
// starts and answers every ask as the daemon would, echoing whatever it
// is sent. Nothing it answers is ever served: heavy does not ask it (the
// daemon renders heavy without guest asks while it cannot listen), status
// says why in guest_error, and check warns. Once the address is free the
// daemon takes it and heavy shares the page through the daemon. The
// secret heavy checks appears in no status and no log line.
func TestGuestImpostor(t *testing.T) {
	srv, _, _ := sessionBackend(t)
	var asked atomic.Int64
	imp, impostor := startImpostor(t, &asked)

	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Backend = profiles.BackendAt("127.0.0.1", srv.Listener.Addr().(*net.TCPAddr).Port)
		cfg.Profiles.GuestListen = imp.Addr().String()
	})
	s, err := d.status()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.GuestError, "profiles.guest_listen") {
		t.Errorf("status guest_error %q, want why the daemon does not listen", s.GuestError)
	}
	out, _, code := d.gs("check")
	if code != 1 || !strings.Contains(out, "guest pages off") {
		t.Errorf("check: exit %d %q, want WARNING naming guest pages", code, out)
	}
	if _, errOut, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	get := func() (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(v.URL("/article"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for i := range 4 {
		if resp, body := get(); strings.Contains(body, "IMPOSTOR") || resp.Header.Get("X-Cache") == "HIT" {
			t.Fatalf("view %d: X-Cache %s, body %q: the impostor's answer was served", i+1, resp.Header.Get("X-Cache"), body)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("heavy asked the impostor %d times, want never", n)
	}

	// The address comes free: the daemon takes it, and heavy asks it.
	impostor.Close()
	d.eventually("the daemon listens and heavy asks it", 60*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.GuestError != "" {
			return fmt.Errorf("guest_error %q", s.GuestError)
		}
		if err := inSync(s, "heavy"); err != nil {
			return err
		}
		resp, body := get()
		if resp.Header.Get("X-Cache") != "HIT" || strings.Contains(body, "IMPOSTOR") {
			return fmt.Errorf("X-Cache %s, Set-Cookie %q: no guest copy yet", resp.Header.Get("X-Cache"), resp.Header.Values("Set-Cookie"))
		}
		return nil
	})

	// The secret is in the active heavy VCL alone.
	vcl, err := v.Adm("vcl.show", activeVCL(t, v))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(vcl, profiles.GuestSecretHeader+` != "`)
	if i < 0 {
		t.Fatalf("the active heavy VCL checks no %s:\n%s", profiles.GuestSecretHeader, vcl)
	}
	secret, _, _ := strings.Cut(vcl[i+len(profiles.GuestSecretHeader)+5:], `"`)
	if len(secret) < 32 || secret == profiles.RedactedGuestSecret {
		t.Fatalf("heavy checks the secret %q, want one of this start", secret)
	}
	statusOut, _, _ := d.gs("status", "--json")
	logText, _ := os.ReadFile(d.cfg.Log.File)
	shown, _, _ := d.gs("profiles", "show", "heavy")
	for what, text := range map[string]string{"status": statusOut, "log": string(logText), "output": d.out.String(), "profiles show": shown} {
		if strings.Contains(text, secret) {
			t.Errorf("the guest secret appears in the daemon's %s", what)
		}
	}
}

// TestGuestListenChangedByReload: a reload that moves guest_listen
// cannot move the daemon's listener (a restart does), so heavy stops
// asking rather than ask whoever holds the new address; the log says a
// restart applies it.
func TestGuestListenChangedByReload(t *testing.T) {
	srv, _, _ := sessionBackend(t)
	var asked atomic.Int64
	imp, _ := startImpostor(t, &asked)

	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Backend = profiles.BackendAt("127.0.0.1", srv.Listener.Addr().(*net.TCPAddr).Port)
	})
	d.cfg.Profiles.GuestListen = imp.Addr().String()
	b, err := yaml.Marshal(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.configPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := d.gs("reload"); code != 0 {
		t.Fatalf("reload: exit %d: %s", code, errOut)
	}
	if _, errOut, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}
	for i := range 4 {
		resp, err := http.Get(v.URL("/article"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "IMPOSTOR") {
			t.Fatalf("view %d: the impostor's answer was served", i+1)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("heavy asked the new guest_listen %d times before a restart, want never", n)
	}
	logText, _ := os.ReadFile(d.cfg.Log.File)
	if !strings.Contains(string(logText), "profiles.guest_listen") {
		t.Errorf("the log does not say guest_listen needs a restart:\n%s", logText)
	}
}

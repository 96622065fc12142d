package guest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// site is a backend that gives every request a new session, as a PHP
// site calling session_start() on every page does.
type site struct {
	srv      *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	pages    map[string]func(sid string) string // path -> body for a session
	headers  map[string]func(h http.Header)     // path -> its own response headers
	seen     []seen                             // every request, as it came
}

// seen is a request as the backend got it.
type seen struct {
	target string // the request-target, as sent
	host   string
	header http.Header
}

func newSite(t *testing.T) *site {
	s := &site{pages: map[string]func(string) string{
		"/article": func(string) string { return "<p>The same article for everyone.</p>" },
		"/form": func(string) string {
			return `<form><input type="hidden" name="csrf" value="` + token() + `"></form>`
		},
		"/meta": func(string) string {
			return `<head><meta name="csrf-token" content="` + token() + `"></head><p>An article.</p>`
		},
		"/sid":    func(sid string) string { return `<a href="/next?sid=` + sid + `">next</a>` },
		"/nocook": func(string) string { return "no cookie here" },
	}, headers: map[string]func(http.Header){}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		s.seen = append(s.seen, seen{target: r.RequestURI, host: r.Host, header: r.Header.Clone()})
		page, headers := s.pages[r.URL.Path], s.headers[r.URL.Path]
		s.mu.Unlock()
		if r.Header.Get("Cookie") != "" || strings.HasPrefix(r.Header.Get("X-Gs-Guest"), "a") {
			http.Error(w, "a check must look like a new visitor", http.StatusBadRequest)
			return
		}
		if page == nil {
			http.NotFound(w, r)
			return
		}
		sid := token()
		if r.URL.Path != "/nocook" {
			http.SetCookie(w, &http.Cookie{Name: "PHPSESSID", Value: sid, Path: "/"})
			w.Header().Set("Cache-Control", "no-store, no-cache, must-revalidate")
			w.Header().Set("Expires", "Thu, 19 Nov 1981 08:52:00 GMT")
		}
		if r.URL.Query().Get("private") != "" {
			w.Header().Set("Cache-Control", "private, max-age=60")
		}
		w.Header().Set("Content-Type", "text/html")
		if headers != nil {
			headers(w.Header())
		}
		io.WriteString(w, page(sid))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) set(path string, page func(string) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[path] = page
}

// setHeaders gives the page at path headers of its own, set last.
func (s *site) setHeaders(path string, headers func(http.Header)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headers[path] = headers
}

// requestsSeen are the backend's requests so far.
func (s *site) requestsSeen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.seen...)
}

func token() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// clock is a settable clock for the verdicts' lifetimes.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newServer(t *testing.T, s *site) (*Server, *clock) {
	c := &clock{now: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	return New(Options{Backend: s.srv.Listener.Addr().String(), Timeout: 5 * time.Second, Now: c.Now}), c
}

// ask sends heavy's ask for path as Varnish would, for a visitor of its
// own: the per-client budget has tests of its own.
func ask(t *testing.T, g *Server, path string) *http.Response {
	t.Helper()
	return askWith(t, g, path, nil)
}

// askFrom is ask for the visitor whose client key (X-Gs-Client) is client.
func askFrom(t *testing.T, g *Server, client, path string) *http.Response {
	t.Helper()
	return askWith(t, g, path, func(r *http.Request) {
		r.Header.Set("X-Forwarded-For", client)
		r.Header.Set(ClientHeader, client)
	})
}

// askWith is ask with the request as edit leaves it: first the
// visitor's headers, no cookie, gearshift's marker, as Varnish sends.
func askWith(t *testing.T, g *Server, path string, edit func(*http.Request)) *http.Response {
	t.Helper()
	client := newVisitor()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Host = "shop.example"
	r.RemoteAddr = "127.0.0.1:41000" // Varnish
	r.Header.Set("X-Gs-Guest", "ask")
	r.Header.Set("X-Varnish", "32770")
	r.Header.Set("User-Agent", "Mozilla/5.0")
	r.Header.Set("X-Forwarded-For", client)
	r.Header.Set(ClientHeader, client)
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w.Result()
}

// newVisitor is a visitor's address of its own: one in a /64 of the
// documentation prefix.
func newVisitor() string {
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("2001:db8:%x:%x::1", uint16(b[0])<<8|uint16(b[1]), uint16(b[2])<<8|uint16(b[3]))
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSharedOnlyWhenTheSame(t *testing.T) {
	s := newSite(t)
	g, _ := newServer(t, s)

	resp := ask(t, g, "/article")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(Header) != Shared {
		t.Fatalf("the same article for two new visitors: status %d, %s %q (%s), want a shared copy",
			resp.StatusCode, Header, resp.Header.Get(Header), resp.Header.Get("X-Gs-Guest-Why"))
	}
	if got := body(t, resp); got != "<p>The same article for everyone.</p>" {
		t.Errorf("copy's body %q, want the article", got)
	}
	for _, h := range []string{"Set-Cookie", "Cache-Control", "Expires"} {
		if v := resp.Header.Values(h); len(v) > 0 {
			t.Errorf("copy carries %s: %q, want it gone with the session", h, v)
		}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html" {
		t.Errorf("copy's Content-Type %q, want the backend's", ct)
	}

	for path, why := range map[string]string{
		"/form":              "differs between two new visitors",
		"/meta":              "differs between two new visitors",
		"/sid":               "carries the value of cookie PHPSESSID",
		"/nocook":            "sets no cookie",
		"/article?private=1": "Cache-Control: private",
		"/missing":           "status 404",
	} {
		resp := ask(t, g, path)
		if resp.StatusCode == http.StatusOK || resp.Header.Get(Header) != No {
			t.Errorf("%s: status %d, %s %q, want a no", path, resp.StatusCode, Header, resp.Header.Get(Header))
		}
		if got := resp.Header.Get("X-Gs-Guest-Why"); got != why {
			t.Errorf("%s: no because %q, want %q", path, got, why)
		}
	}
	st := g.Stats()
	if st.Shared != 1 || st.Private != 3 {
		t.Errorf("stats: %d shared, %d private, want 1 and 3 (/form, /meta, /sid)", st.Shared, st.Private)
	}
	want := []string{"shop.example/form", "shop.example/meta", "shop.example/sid"}
	if fmt.Sprint(st.PrivateURLs) != fmt.Sprint(want) {
		t.Errorf("private URLs %q, want %q", st.PrivateURLs, want)
	}
}

func TestPrivateRememberedThenCheckedAgain(t *testing.T) {
	s := newSite(t)
	g, c := newServer(t, s)
	ask(t, g, "/form")
	before := s.requests.Load()
	if resp := ask(t, g, "/form"); resp.Header.Get(Header) != No {
		t.Fatalf("a page found private, asked again: %s %q, want no", Header, resp.Header.Get(Header))
	}
	if n := s.requests.Load() - before; n != 0 {
		t.Errorf("a page found private, asked again within %s: %d backend requests, want none", PrivateFor, n)
	}
	c.add(PrivateFor)
	s.set("/form", func(string) string { return "<p>No form any more.</p>" })
	if resp := ask(t, g, "/form"); resp.Header.Get(Header) != Shared {
		t.Errorf("after %s, the page changed to be the same for all: %s %q, want it checked again and shared", PrivateFor, Header, resp.Header.Get(Header))
	}

	ask(t, g, "/meta")
	g.Shift()
	before = s.requests.Load()
	ask(t, g, "/meta")
	if n := s.requests.Load() - before; n != 2 {
		t.Errorf("after a shift to heavy, a page found private before: %d backend requests, want 2 (checked again)", n)
	}
}

// A shared page that starts to carry a token stops being shared at its
// next check: every ask compares anew.
func TestTokenStopsSharingAtNextCheck(t *testing.T) {
	s := newSite(t)
	g, _ := newServer(t, s)
	if resp := ask(t, g, "/article"); resp.Header.Get(Header) != Shared {
		t.Fatalf("article: %s %q, want shared", Header, resp.Header.Get(Header))
	}
	s.set("/article", func(string) string { return `<p>The article.</p><input name="csrf" value="` + token() + `">` })
	if resp := ask(t, g, "/article"); resp.Header.Get(Header) != No {
		t.Errorf("the article once it carries a token: %s %q, want no at the next check", Header, resp.Header.Get(Header))
	}
	if st := g.Stats(); st.Shared != 0 || st.Private != 1 {
		t.Errorf("stats: %d shared, %d private, want 0 and 1", st.Shared, st.Private)
	}
}

// Checks are bounded: a flood of distinct URLs costs at most the budget's
// backend requests, however many asks.
func TestChecksBounded(t *testing.T) {
	s := newSite(t)
	g, _ := newServer(t, s)
	over := 0
	for i := range 200 {
		resp := ask(t, g, fmt.Sprintf("/form?s=%d", i))
		if resp.Header.Get("X-Gs-Guest-Why") == "over the check budget" {
			over++
		}
	}
	// The clock stands still: the burst alone.
	if n := s.requests.Load(); n > 2*checkBurst {
		t.Errorf("200 asks for distinct URLs: %d backend requests, want at most %d", n, 2*checkBurst)
	}
	if over != 200-checkBurst {
		t.Errorf("%d asks over the budget, want %d", over, 200-checkBurst)
	}
}

// Asks for a page whose check runs wait for it: one check, one copy for all.
func TestConcurrentAsksShareACheck(t *testing.T) {
	s := newSite(t)
	release := make(chan struct{})
	var first sync.Once
	s.set("/slow", func(string) string {
		first.Do(func() { <-release })
		return "<p>slow but the same</p>"
	})
	g, _ := newServer(t, s)
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		// One visitor's asks too: a check that runs is joined, whoever
		// started it.
		wg.Go(func() { results[i] = askFrom(t, g, "203.0.113.8", "/slow").Header.Get(Header) })
	}
	// Every ask is in: the first waits in the backend, the others on it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		joined := -1
		g.mu.Lock()
		if f := g.inflight["shop.example/slow"]; f != nil {
			joined = f.joined
		}
		g.mu.Unlock()
		if joined == len(results)-1 && s.requests.Load() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the check never gathered every ask: %d joined, %d backend requests", joined, s.requests.Load())
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := s.requests.Load(); n != 2 {
		t.Errorf("8 concurrent asks: %d backend requests, want 2 (one check)", n)
	}
	for i, r := range results {
		if r != Shared {
			t.Errorf("ask %d: %s %q, want the shared copy", i, Header, r)
		}
	}
}

func TestBackendDownIsNo(t *testing.T) {
	s := newSite(t)
	g, _ := newServer(t, s)
	s.srv.Close()
	resp := ask(t, g, "/article")
	if resp.Header.Get(Header) != No || resp.Header.Get("X-Gs-Guest-Why") != "fetch failed" {
		t.Errorf("backend down: %s %q (%s), want no because the fetch failed", Header, resp.Header.Get(Header), resp.Header.Get("X-Gs-Guest-Why"))
	}
	if st := g.Stats(); st.Shared+st.Private != 0 {
		t.Errorf("a failed fetch left a verdict: %+v", st)
	}
}

// Only an anonymous GET without a body is checked: a check sends the
// request twice, which only a plain GET may be.
func TestOnlyAnonymousGET(t *testing.T) {
	s := newSite(t)
	g, _ := newServer(t, s)
	ask := func(method string, body io.Reader) *http.Request {
		r := httptest.NewRequest(method, "/article", body)
		r.Host = "shop.example"
		r.Header.Set("X-Gs-Guest", "ask")
		return r
	}
	for _, tc := range []struct {
		name string
		r    *http.Request
	}{
		{"POST", ask(http.MethodPost, strings.NewReader("a=1"))},
		{"PUT", ask(http.MethodPut, strings.NewReader("a=1"))},
		{"DELETE", ask(http.MethodDelete, nil)},
		{"PATCH", ask(http.MethodPatch, strings.NewReader("a=1"))},
		{"HEAD", ask(http.MethodHead, nil)},
		{"OPTIONS", ask(http.MethodOptions, nil)},
		{"GET with a cookie", func() *http.Request {
			r := ask(http.MethodGet, nil)
			r.Header.Set("Cookie", "PHPSESSID=abc")
			return r
		}()},
		{"GET with a body", ask(http.MethodGet, strings.NewReader("a=1"))},
		{"GET with a chunked body", func() *http.Request {
			r := ask(http.MethodGet, strings.NewReader("a=1"))
			r.ContentLength = -1
			r.TransferEncoding = []string{"chunked"}
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			g.ServeHTTP(w, tc.r)
			if w.Code == http.StatusOK || w.Header().Get(Header) != No {
				t.Errorf("status %d, %s %q, want a no", w.Code, Header, w.Header().Get(Header))
			}
		})
	}
	if n := s.requests.Load(); n != 0 {
		t.Errorf("%d backend requests for asks that are not anonymous GETs without a body, want none", n)
	}
}

// Every answer carries the secret heavy stores a guest answer by, and
// only the Server's own: an ask that carries one changes nothing.
func TestAnswersCarryTheSecret(t *testing.T) {
	s := newSite(t)
	secret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	g := New(Options{Backend: s.srv.Listener.Addr().String(), Timeout: 5 * time.Second, Logger: zap.New(core), Secret: secret})
	for _, tc := range []struct {
		name, method, path, forged, want string
	}{
		{"shared", http.MethodGet, "/article", "", Shared},
		{"refused", http.MethodGet, "/form", "", No},
		{"shared, the ask carrying a secret", http.MethodGet, "/article", "forged", Shared},
		{"refused, the ask carrying a secret", http.MethodGet, "/missing", "forged", No},
		{"refused before a check, the ask carrying the secret", http.MethodPost, "/article", secret, No},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := askWith(t, g, tc.path, func(r *http.Request) {
				r.Method = tc.method
				if tc.forged != "" {
					r.Header.Set(SecretHeader, tc.forged)
				}
			})
			if got := resp.Header.Get(Header); got != tc.want {
				t.Errorf("%s %q, want %q", Header, got, tc.want)
			}
			if got := resp.Header.Values(SecretHeader); len(got) != 1 || got[0] != secret {
				t.Errorf("%s %q, want the Server's secret alone", SecretHeader, got)
			}
		})
	}
	for _, r := range s.requestsSeen() {
		if v := r.header.Values(SecretHeader); len(v) > 0 {
			t.Errorf("the backend got %s %q, want it never sent", SecretHeader, v)
		}
	}
	if logs.Len() == 0 {
		t.Error("no log of the page found private")
	}
	for _, e := range logs.All() {
		if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, secret) {
			t.Errorf("the secret logged: %s", line)
		}
	}

	none, _ := newServer(t, s)
	resp := askWith(t, none, "/article", func(r *http.Request) { r.Header.Set(SecretHeader, "forged") })
	if v := resp.Header.Values(SecretHeader); len(v) > 0 {
		t.Errorf("no secret set, an ask carrying one: answered with %s %q, want none", SecretHeader, v)
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := hex.DecodeString(a); err != nil || len(raw) != 32 {
		t.Errorf("secret %q: want 32 bytes in hex (%v)", a, err)
	}
	if a == b {
		t.Errorf("two secrets alike: %q", a)
	}
}

// Why a page is refused is said in gearshift's words, never the visitor's:
// the answer goes into Varnish's log and to heavy.
func TestAnswersHoldNoVisitorBytes(t *testing.T) {
	const mark = "zq7visitor"
	s := newSite(t)
	g, _ := newServer(t, s)
	paths := []string{"/" + mark, "/form?q=" + mark, "/article?private=" + mark, "/nocook?" + mark, "/sid?" + mark}
	for i := range 10 {
		// One client (the listener's peer: the marks are no addresses)
		// until it is over its budget.
		paths = append(paths, fmt.Sprintf("/article?%s=%d", mark, i))
	}
	for _, path := range paths {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			resp := askWith(t, g, path, func(r *http.Request) {
				r.Method = method
				for _, h := range []string{"User-Agent", "Accept-Language", "X-Forwarded-For", ClientHeader, SecretHeader, "X-" + mark} {
					r.Header.Set(h, mark)
				}
			})
			for name, vs := range resp.Header {
				for _, v := range append(vs, name) {
					if strings.Contains(strings.ToLower(v), mark) {
						t.Errorf("%s %s: answered with %s: %q, the visitor's bytes", method, path, name, v)
					}
				}
			}
		}
	}
}

package apps

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/guest"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// testGuestSecret is the secret of the tests' guest.Server, as the
// daemon makes one at its start; heavy stores only answers carrying it.
const testGuestSecret = "5ec7e75ec7e75ec7e75ec7e75ec7e75e"

// guestSite is the session site with heavy asking a guest.Server, the
// daemon's, for its pages (profiles.guest_pages: auto, the default).
type guestSite struct {
	*sessionSite
	guest *guest.Server
}

// startGuestSite starts the session site on php, its pages costing
// workMS of CPU each, and a guest.Server the profiles ask.
func startGuestSite(tb testing.TB, php lampstack.Stack, workMS int) *guestSite {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := startSessionSiteWith(tb, php, ln.Addr().String(), workMS)
	g := guest.New(guest.Options{Backend: fmt.Sprintf("127.0.0.1:%d", s.port), Timeout: 30 * time.Second, Secret: testGuestSecret})
	srv := &http.Server{Handler: g}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return &guestSite{sessionSite: s, guest: g}
}

// secrets are the session ids and form tokens of the pages each visitor
// got; no two visitors may share one.
type secrets map[string]string // secret -> the visitor (address) it went to

var tokenRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"|name="csrf-token" content="([0-9a-f]+)"`)

// note records what of p's secrets went to who, and fails when another
// visitor got one of them.
func (sec secrets) note(t *testing.T, who string, p lampstack.Page) {
	t.Helper()
	var found []string
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		found = append(found, c.Value)
	}
	for _, m := range tokenRE.FindAllStringSubmatch(p.Body, -1) {
		found = append(found, m[1]+m[2])
	}
	for _, v := range found {
		if other, ok := sec[v]; ok && other != who {
			t.Errorf("%s got %s's secret %s at %s (X-Cache %s)", who, other, v, p.URL, p.XCache())
		}
		sec[v] = who
	}
}

// TestGuestPages: in heavy, on a site that gives every visitor a session,
// the pages that are the same for every new visitor are shared with
// cookie-less visitors, without a Set-Cookie; the forms and the page
// whose token is in a <meta> tag are never shared and work; no visitor
// gets another's session or token; signed-in users see their own pages.
// On mod_php and on PHP-FPM.
func TestGuestPages(t *testing.T) { lampstack.EachStack(t, testGuestPages) }

func testGuestPages(t *testing.T, php lampstack.Stack) {
	s := startGuestSite(t, php, 0)
	lampstack.Use(t, s.v, "gs-heavy")
	sec := secrets{}
	n := 0
	newVisitor := func() *lampstack.Browser {
		n++
		return s.browser(t, fmt.Sprintf("198.51.100.%d", n))
	}

	// Articles: the first view sets a cookie (a hit-for-miss), the
	// second asks the daemon, the third is a HIT for a visitor with no
	// cookie, and none of them hands out a session.
	for _, path := range []string{"/", "/article.php?id=1", "/article.php?id=2"} {
		var last lampstack.Page
		for i := range 4 {
			b := newVisitor()
			last = b.Get(path)
			sec.note(t, b.IP, last)
			wantSiteUser(t, fmt.Sprintf("cookie-less view %d of %s", i+1, path), last, "")
			if i >= 1 && len(last.Header.Values("Set-Cookie")) > 0 {
				t.Errorf("cookie-less view %d of %s (X-Cache %s): Set-Cookie %q, want the shared copy without one",
					i+1, path, last.XCache(), last.Header.Values("Set-Cookie"))
			}
		}
		if last.XCache() != "HIT" {
			t.Errorf("fourth cookie-less view of %s: X-Cache %s, want a HIT on the guest copy", path, last.XCache())
		}
	}

	// The forms and the <meta> token: never shared, a token per visitor.
	for _, path := range []string{"/login.php", "/comment.php?id=1", "/meta.php"} {
		tokens := map[string]bool{}
		for i := range 4 {
			b := newVisitor()
			p := b.Get(path)
			sec.note(t, b.IP, p)
			if p.XCache() == "HIT" {
				t.Errorf("view %d of %s: X-Cache HIT, a page with a session's token shared", i+1, path)
			}
			m := tokenRE.FindStringSubmatch(p.Body)
			if m == nil {
				t.Fatalf("%s has no token: %.300s", path, p.Body)
			}
			tokens[m[1]+m[2]] = true
			if cookieValue(b, "/", "PHPSESSID") == "" {
				t.Errorf("view %d of %s: no session cookie, the form's token cannot be checked", i+1, path)
			}
		}
		if len(tokens) != 4 {
			t.Errorf("%s: %d distinct tokens for 4 new visitors, want 4", path, len(tokens))
		}
	}

	// A comment posts through Varnish with the visitor's cookie jar, and
	// shows on the article for its author.
	c := newVisitor()
	f := mustForm(t, "comment form", c.Get("/comment.php?id=1").Body, `id="comment-form"`)
	text := "A comment " + lampstack.RandomHex(t, 4)
	f.fields.Set("comment", text)
	if p := c.Post("/comment.php?id=1", f.fields); p.Status != http.StatusOK || !strings.Contains(p.Body, text) {
		t.Errorf("posting a comment: status %d at %s, comment shown: %v", p.Status, p.URL, strings.Contains(p.Body, text))
	}

	// Signing in works, and a signed-in user sees her own pages, also
	// those shared with guests.
	alice := newVisitor()
	f = mustForm(t, "sign-in form", alice.Get("/login.php").Body, `id="login"`)
	f.fields.Set("name", "alice")
	f.fields.Set("password", s.users["alice"])
	if p := alice.Post("/login.php", f.fields); p.Status != http.StatusOK || siteUser(p) != "alice" {
		t.Fatalf("alice's sign-in: status %d, a page for %q at %s", p.Status, siteUser(p), p.URL)
	}
	for _, path := range []string{"/", "/article.php?id=1", "/account.php"} {
		for range 2 {
			p := alice.Get(path)
			sec.note(t, alice.IP, p)
			wantSiteUser(t, "alice's GET "+path, p, "alice")
		}
		wantSiteUser(t, "a guest's GET "+path+" after alice's", newVisitor().Do(http.MethodGet, path, nil, nil), "")
	}

	st := s.guest.Stats()
	if st.Shared < 3 || st.Private < 3 {
		t.Errorf("guest stats: %d shared, %d private, want at least 3 and 3 (articles; forms and the meta page)", st.Shared, st.Private)
	}
	t.Logf("guest pages: %d shared, %d found private (%s), %d checks", st.Shared, st.Private, strings.Join(st.PrivateURLs, ", "), st.Checks)
}

// TestGuestPageStopsWhenItCarriesAToken: a shared page that starts to
// carry the session's token is no longer shared once its copy is checked
// again (heavy_min_ttl, here 2 s). On mod_php and on PHP-FPM.
func TestGuestPageStopsWhenItCarriesAToken(t *testing.T) {
	lampstack.EachStack(t, testGuestPageStopsWhenItCarriesAToken)
}

func testGuestPageStopsWhenItCarriesAToken(t *testing.T, php lampstack.Stack) {
	s := startGuestSite(t, php, 0)
	cfg := s.config()
	cfg.Profiles.HeavyMinTTL = timefmt.Duration(2 * time.Second)
	lampstack.LoadProfiles(t, s.v, cfg, "fast")
	lampstack.Use(t, s.v, "gsfast-heavy")
	sec := secrets{}
	view := func(i int) lampstack.Page {
		b := s.browser(t, fmt.Sprintf("203.0.113.%d", i))
		p := b.Get("/changing.php")
		sec.note(t, b.IP, p)
		return p
	}
	for i := range 3 {
		view(i)
	}
	if p := view(3); p.XCache() != "HIT" {
		t.Fatalf("the page before it changes: X-Cache %s, want a HIT on the guest copy", p.XCache())
	}
	if err := os.WriteFile(filepath.Join(s.data, "changing-token"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The copy may be served until its TTL ends and for the refresh that
	// checks it; after that, every new visitor gets a token of its own.
	time.Sleep(2500 * time.Millisecond)
	view(4) // starts the refresh: the check finds the page private
	deadline := time.Now().Add(10 * time.Second)
	for i := 5; ; i++ {
		p := view(i)
		if tokenRE.MatchString(p.Body) && p.XCache() != "HIT" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after its TTL the changed page is still served as the old copy (X-Cache %s)", p.XCache())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := 100; i < 104; i++ {
		if p := view(i); p.XCache() == "HIT" || !tokenRE.MatchString(p.Body) {
			t.Errorf("view %d after the check: X-Cache %s, token shown: %v; want the visitor's own page", i, p.XCache(), tokenRE.MatchString(p.Body))
		}
	}
}

// BenchmarkGuestPages measures an article of the session site (a session
// on every page, PHP's no-store) for visitors without cookies, through
// light, heavy with guest_pages off and heavy with guest_pages auto (the
// daemon's guest.Server), side by side: one bounded wrk run each, from an
// empty cache, as req/s through Varnish and req/s reaching Apache (the
// daemon's checks included: they go to Apache directly). The pages cost
// 25 ms of CPU each, a CMS's (SITE_WORK_MS, as in make bench-surge).
//
//	go test ./profiles/apps -run '^$' -bench GuestPages -benchtime 1x
func BenchmarkGuestPages(b *testing.B) {
	wrk := lampstack.Need(b, "wrk", "wrk")["wrk"]
	s := startGuestSite(b, lampstack.ModPHP, 25)
	off := s.config()
	off.Profiles.GuestPages = "off"
	lampstack.LoadProfiles(b, s.v, off, "off")
	for _, run := range []struct{ name, vcl string }{
		{"light", "gs-light"},
		{"heavy-guest_pages_off", "gsoff-heavy"},
		{"heavy-guest_pages_auto", "gs-heavy"},
	} {
		b.Run(run.name, func(b *testing.B) {
			lampstack.Use(b, s.v, run.vcl)
			s.guest.Shift()
			lampstack.Throughput(b, wrk, s.v, "/article.php?id=1", s.dir)
		})
	}
}

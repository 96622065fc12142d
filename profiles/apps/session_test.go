package apps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// sessionSite is testdata/sessionsite, a small PHP site that starts a
// session on every page (PHPSESSID, PHP's default no-store headers) and
// protects its forms with a token kept in the session.
type sessionSite struct {
	*stack
	users map[string]string // name -> password
	data  string            // SITE_DATA: the site's files
	port  int               // Apache's
}

func startSessionSite(t testing.TB, php lampstack.Stack) *sessionSite {
	t.Helper()
	return startSessionSiteWith(t, php, "", 0)
}

// startSessionSiteWith starts the session site on php with the profiles'
// guest_listen at guest ("": the default), its pages costing workMS
// milliseconds of CPU each (SITE_WORK_MS; 0: none).
func startSessionSiteWith(t testing.TB, php lampstack.Stack, guest string, workMS int) *sessionSite {
	t.Helper()
	bin := lampstack.Need(t, php.Packages(), lampstack.ApachePrograms...)
	st := startVarnish(t)
	st.guest = guest
	s := &sessionSite{stack: st, users: map[string]string{}, data: filepath.Join(st.dir, "site-data")}
	root := filepath.Join(st.dir, "site")
	files, err := filepath.Glob(filepath.Join("testdata", "sessionsite", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/sessionsite: %v", err)
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lampstack.WriteFile(t, filepath.Join(root, filepath.Base(f)), string(text))
	}
	data := s.data
	for _, u := range []string{"alice", "bob"} {
		s.users[u] = lampstack.RandomHex(t, 12)
	}
	users, _ := json.Marshal(s.users)
	lampstack.WriteFile(t, filepath.Join(data, "users.json"), string(users))
	os.Chmod(data, 0o777) // written by Apache's user

	s.port = lampstack.FreePort(t)
	lampstack.StartApache(t, lampstack.Apache{Dir: st.dir, Root: root, Port: s.port, Stack: php, Probe: "/style.css",
		Conf: fmt.Sprintf("SetEnv SITE_DATA %s\nSetEnv SITE_WORK_MS %d", data, workMS)}, bin)
	st.loadDefaults(t, s.port)
	return s
}

var whoRE = regexp.MustCompile(`<p id="who">(?:Signed in as <b class="user">([^<]*)</b>|(Not signed in))`)

// siteUser is the user a page of the site was made for: "" for a visitor
// not signed in, "?" when the page does not say.
func siteUser(p lampstack.Page) string {
	m := whoRE.FindStringSubmatch(p.Body)
	switch {
	case m == nil:
		return "?"
	case m[2] != "":
		return ""
	}
	return m[1]
}

func wantSiteUser(t *testing.T, what string, p lampstack.Page, user string) {
	t.Helper()
	if got := siteUser(p); got != user {
		t.Errorf("%s: a page for %q (status %d, X-Cache %s, at %s), want one for %q", what, got, p.Status, p.XCache(), p.URL, user)
	}
}

// TestSessionSite runs a site that starts a PHP session on every page,
// on mod_php and on PHP-FPM, through each gear of the default profiles: every response sets a
// cookie and says no-store, so no page is ever shared or stored, in any
// gear; every visitor gets a session and a form token of their own;
// signed-in users see their own pages, their writes at once, and nothing
// once signed out.
func TestSessionSite(t *testing.T) {
	lampstack.EachStack(t, func(t *testing.T, php lampstack.Stack) {
		s := startSessionSite(t, php)
		s.eachGear(t, func(t *testing.T, gear string, i int) { testSessionGear(t, s, gear, i) })
	})
}

func testSessionGear(t *testing.T, s *sessionSite, gear string, i int) {
	s.checkRepeat(t, visitor(i, 1), "/style.css", true)
	for _, path := range []string{"/", "/login.php"} {
		wantSiteUser(t, "anonymous GET "+path, s.checkRepeat(t, visitor(i, 1), path, false), "")
	}

	// Visitors without cookies (a first visit, a crawler) each get a
	// session of their own.
	seen := map[string]bool{}
	for n := 0; n < 3; n++ {
		b := s.browser(t, visitor(i, 1))
		p := b.Get("/")
		wantSiteUser(t, "a first visit", p, "")
		id := cookieValue(b, "/", "PHPSESSID")
		if id == "" || seen[id] || p.XCache() == "HIT" {
			t.Errorf("first visit %d: X-Cache %s, PHPSESSID %q (already given: %v), want a new session, not a shared copy", n+1, p.XCache(), id, seen[id])
		}
		seen[id] = true
	}

	// The sign-in form: a token per session, and the token is checked.
	anon := s.browser(t, visitor(i, 1))
	alice, bob := s.browser(t, visitor(i, 2)), s.browser(t, visitor(i, 3))
	forms := map[*lampstack.Browser]form{}
	for _, b := range []*lampstack.Browser{alice, bob} {
		p := b.Get("/login.php")
		forms[b] = mustForm(t, "sign-in form", p.Body, `id="login"`)
		if p.XCache() == "HIT" {
			t.Errorf("sign-in form for %s: X-Cache HIT, a shared copy", b.IP)
		}
	}
	if a, b := forms[alice].fields.Get("csrf"), forms[bob].fields.Get("csrf"); a == "" || a == b {
		t.Errorf("two visitors got sign-in tokens %q and %q, want two different ones", a, b)
	}
	wrong := forms[bob].fields
	wrong.Set("csrf", forms[alice].fields.Get("csrf"))
	wrong.Set("name", "bob")
	wrong.Set("password", s.users["bob"])
	if p := bob.Post("/login.php", wrong); p.Status != http.StatusForbidden || siteUser(p) == "bob" {
		t.Errorf("signing in with another session's token: status %d, a page for %q; want the site's 403", p.Status, siteUser(p))
	}
	for b, name := range map[*lampstack.Browser]string{alice: "alice", bob: "bob"} {
		f := mustForm(t, "sign-in form", b.Get("/login.php").Body, `id="login"`)
		f.fields.Set("name", name)
		f.fields.Set("password", s.users[name])
		p := b.Post("/login.php", f.fields)
		if p.Status != http.StatusOK || !strings.HasSuffix(p.URL, "/account.php") {
			t.Fatalf("%s's sign-in: status %d at %s", name, p.Status, p.URL)
		}
		wantSiteUser(t, name+"'s sign-in", p, name)
	}
	users := map[*lampstack.Browser]string{anon: "", alice: "alice", bob: "bob"}

	// Every page, twice, in turn: each is the right user's.
	for _, path := range []string{"/", "/account.php", "/prefs.php"} {
		for n := 0; n < 2; n++ {
			for _, b := range []*lampstack.Browser{alice, bob, anon} {
				p := b.Do(http.MethodGet, path, nil, nil)
				wantSiteUser(t, fmt.Sprintf("GET %s #%d", path, n+1), p, users[b])
				if p.XCache() == "HIT" {
					t.Errorf("GET %s #%d for %q: X-Cache HIT on a no-store page", path, n+1, users[b])
				}
			}
		}
	}

	// A write shows at once to its author, and only to her.
	note := fmt.Sprintf("A note by Alice in %s %s", gear, lampstack.RandomHex(t, 4))
	f := mustForm(t, "note form", alice.Get("/account.php").Body, `id="note-form"`)
	f.fields.Set("note", note)
	if p := alice.Post("/account.php", f.fields); !strings.Contains(p.Body, `<p id="note">`+note) {
		t.Errorf("Alice's note not shown at once after saving it: status %d at %s (X-Cache %s)", p.Status, p.URL, p.XCache())
	}
	if p := bob.Get("/account.php"); strings.Contains(p.Body, note) || siteUser(p) != "bob" {
		t.Errorf("Bob's account page shows Alice's note (X-Cache %s)", p.XCache())
	}

	// A preference: Alice's pages turn green, Bob's and the visitor's stay
	// blue.
	f = mustForm(t, "preferences", alice.Get("/prefs.php").Body, `id="prefs"`)
	f.fields.Set("colour", "green")
	alice.Post("/prefs.php", f.fields)
	for b, want := range map[*lampstack.Browser]string{alice: "green", bob: "blue", anon: "blue"} {
		for _, path := range []string{"/", "/prefs.php"} {
			if path == "/prefs.php" && b == anon {
				continue
			}
			if p := b.Get(path); !strings.Contains(p.Body, `class="colour-`+want+`"`) {
				t.Errorf("%s: GET %s after Alice's preference is not %s (X-Cache %s)", b.IP, path, want, p.XCache())
			}
		}
	}

	// Signing out ends the session: the old cookie, replayed, gets nothing
	// of Alice's.
	old := alice.CookieHeader("/")
	f = mustForm(t, "sign-out form", alice.Get("/").Body, `id="logout"`)
	if p := alice.Post("/logout.php", f.fields); p.Status != http.StatusOK || siteUser(p) != "" {
		t.Errorf("sign-out: status %d, a page for %q at %s", p.Status, siteUser(p), p.URL)
	}
	replay := s.browser(t, alice.IP)
	for _, path := range []string{"/", "/account.php", "/prefs.php"} {
		wantSiteUser(t, "after sign-out, GET "+path, alice.Do(http.MethodGet, path, nil, nil), "")
		wantSiteUser(t, "replaying the old cookie, GET "+path, replay.Do(http.MethodGet, path, nil, map[string]string{"Cookie": old}), "")
		wantSiteUser(t, "Bob after Alice's sign-out, GET "+path, bob.Do(http.MethodGet, path, nil, nil), "bob")
	}
}

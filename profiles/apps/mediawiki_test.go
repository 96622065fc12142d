package apps

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// wiki is Debian's MediaWiki, run from /usr/share/mediawiki with a
// LocalSettings.php, a cache and a database of its own.
type wiki struct {
	*stack
	users map[string]string // user name -> password
}

const (
	wikiDB   = "wikidb" // its cookies: wikidb_session, wikidbUserID, wikidbUserName
	wikiName = "gearshift test wiki"
)

func startMediaWiki(t testing.TB, php lampstack.Stack) *wiki {
	t.Helper()
	bin := lampstack.Need(t, "mediawiki, mariadb-server, php-mysql, php-intl, php-mbstring, php-xml, "+php.Packages(),
		append(append([]string{"php", "/usr/share/mediawiki/maintenance/install.php"}, lampstack.MariaDBPrograms...), lampstack.ApachePrograms...)...)
	st := startVarnish(t)
	start := time.Now()
	db := lampstack.StartMariaDB(t, st.dir, bin)
	w := &wiki{stack: st, users: map[string]string{"Admin": lampstack.RandomHex(t, 12)}}

	conf := filepath.Join(st.dir, "mediawiki")
	cache := filepath.Join(conf, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(cache, 0o777) // written by Apache's user and by the maintenance scripts
	w.php(t, bin, "", "", "install.php", "--confpath="+conf, "--dbserver=127.0.0.1:"+fmt.Sprint(db.Port),
		"--dbname="+wikiDB, "--dbuser=root", "--dbpass=", "--installdbuser=root", "--installdbpass=",
		"--server="+st.url, "--scriptpath=", "--pass="+w.users["Admin"], "--skins=Vector,MonoBook", wikiName, "Admin")
	settings := filepath.Join(conf, "LocalSettings.php")
	text, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	// What a wiki behind Varnish sets: pages say how long a CDN may keep
	// them, and an edit sends PURGE for the page's URLs to each
	// $wgCdnServers entry (host:port where Varnish listens, this test's
	// Varnish), from loopback: gearshift's default purge_acl. Pages at
	// /index.php/Title on both stacks: MediaWiki turns PATH_INFO off by
	// default under any CGI SAPI, PHP-FPM's included (its pages, and so
	// its PURGEs, would be at /index.php?title=Title), though Apache's
	// proxy_fcgi passes it right.
	lampstack.WriteFile(t, settings, string(text)+fmt.Sprintf(`
$wgUsePathInfo = true;
$wgUseCdn = true;
$wgCdnServers = [ %q ];
$wgCacheDirectory = %q;
$wgEnableEmail = false;
`, st.v.HTTPAddr, cache))

	for _, u := range []string{"Alice", "Bob"} {
		w.users[u] = lampstack.RandomHex(t, 12)
		w.php(t, bin, settings, "", "createAndPromote.php", u, w.users[u])
	}
	for _, g := range gears {
		w.php(t, bin, settings, pageText(g, "Admin"), "edit.php", "--user=Admin", "--summary=created", pageTitle(g))
	}

	port := lampstack.FreePort(t)
	lampstack.StartApache(t, lampstack.Apache{Dir: st.dir, Root: "/usr/share/mediawiki", Port: port, Stack: php,
		Probe: "/index.php/Main_Page", Conf: "SetEnv MW_CONFIG_FILE " + settings}, bin)
	t.Logf("MariaDB, MediaWiki and Apache (%s) up in %s", php, time.Since(start).Round(time.Millisecond))
	st.loadDefaults(t, port)
	return w
}

// php runs a MediaWiki maintenance script with the settings file (none
// for install.php) and stdin.
func (w *wiki) php(t testing.TB, bin map[string]string, settings, stdin, script string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin["php"], append([]string{filepath.Join("/usr/share/mediawiki/maintenance", script)}, args...)...)
	cmd.Env = append(os.Environ(), "MW_CONFIG_FILE="+settings)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

func pageTitle(gear string) string { return "Page for " + gear }

func pageText(gear, author string) string {
	return fmt.Sprintf("The %s page, last written by %s.", gear, author)
}

// wikiPath is the path of a page's view.
func wikiPath(title string) string {
	return "/index.php/" + strings.ReplaceAll(title, " ", "_")
}

var wgUserName = regexp.MustCompile(`"wgUserName":(null|"[^"]*")`)

// wikiUser is the user a MediaWiki page was made for: "" for an
// anonymous visitor, "?" when the page does not say.
func wikiUser(p lampstack.Page) string {
	m := wgUserName.FindStringSubmatch(p.Body)
	switch {
	case m == nil:
		return "?"
	case m[1] == "null":
		return ""
	}
	return strings.Trim(m[1], `"`)
}

// wantUser checks that p is a page for user ("" anonymous).
func wantUser(t *testing.T, what string, p lampstack.Page, user string) {
	t.Helper()
	if got := wikiUser(p); got != user {
		t.Errorf("%s: a page for %q (status %d, X-Cache %s, at %s), want one for %q", what, got, p.Status, p.XCache(), p.URL, user)
	}
}

// TestMediaWiki runs Debian's MediaWiki, on mod_php and on PHP-FPM,
// through each gear of the default profiles: visitors and two users, each with a browser of their own, log
// in, read, edit, change a preference and log out; nobody is ever served
// another's page, a login form is never shared, edits show at once to
// their author and, through MediaWiki's own PURGE, to everyone.
func TestMediaWiki(t *testing.T) {
	lampstack.EachStack(t, func(t *testing.T, php lampstack.Stack) {
		w := startMediaWiki(t, php)
		w.eachGear(t, func(t *testing.T, gear string, i int) { testWikiGear(t, w, gear, i) })
	})
}

func testWikiGear(t *testing.T, w *wiki, gear string, i int) {
	page := wikiPath(pageTitle(gear))
	anon := w.browser(t, visitor(i, 1))

	// Anonymous views say, with $wgUseCdn, that a CDN may keep them.
	p := w.checkRepeat(t, anon.IP, page, cachedRepeat(gear, true, true))
	wantUser(t, "anonymous view", p, "")
	if !strings.Contains(p.Body, pageText(gear, "Admin")) {
		t.Fatalf("anonymous view of %s without its text:\n%.300s", page, p.Body)
	}

	// The login form starts a session (Set-Cookie, no-store): every
	// visitor gets a session and a token of their own, in every gear.
	alice, bob := w.browser(t, visitor(i, 2)), w.browser(t, visitor(i, 3))
	forms := map[*lampstack.Browser]form{}
	for _, b := range []*lampstack.Browser{alice, bob} {
		p := b.Get("/index.php/Special:UserLogin")
		if p.XCache() == "HIT" {
			t.Errorf("login form for %s: X-Cache HIT, a shared copy", b.IP)
		}
		forms[b] = mustForm(t, "login form", p.Body, `userlogin`)
		if cookieValue(b, "/", wikiDB+"_session") == "" {
			t.Errorf("login form for %s set no %s_session cookie (cookies: %v)", b.IP, wikiDB, cookieNames(b, "/"))
		}
	}
	if a, b := forms[alice].fields.Get("wpLoginToken"), forms[bob].fields.Get("wpLoginToken"); a == "" || a == b {
		t.Errorf("two visitors got login tokens %q and %q, want two different ones", a, b)
	}
	if cookieValue(alice, "/", wikiDB+"_session") == cookieValue(bob, "/", wikiDB+"_session") {
		t.Errorf("two visitors got the same session cookie %s", cookieValue(alice, "/", wikiDB+"_session"))
	}
	for b, name := range map[*lampstack.Browser]string{alice: "Alice", bob: "Bob"} {
		f := forms[b]
		f.fields.Set("wpName", name)
		f.fields.Set("wpPassword", w.users[name])
		f.fields.Set("wploginattempt", "Log in")
		p := b.Post(f.action, f.fields)
		if p.Status != http.StatusOK || wikiUser(p) != name {
			t.Fatalf("%s's login: status %d at %s, a page for %q:\n%.400s", name, p.Status, p.URL, wikiUser(p), p.Body)
		}
	}
	users := map[*lampstack.Browser]string{anon: "", alice: "Alice", bob: "Bob"}

	// Every page, twice (heavy keeps a session's pages for that session),
	// in turn: each is the right user's.
	for _, path := range []string{page, "/index.php/Main_Page", "/index.php/Special:Preferences",
		"/index.php/Special:Watchlist", "/index.php?title=" + url.QueryEscape(strings.ReplaceAll(pageTitle(gear), " ", "_")) + "&action=history"} {
		for n := 0; n < 2; n++ {
			for _, b := range []*lampstack.Browser{alice, bob, anon} {
				p := b.Do(http.MethodGet, path, nil, nil)
				wantUser(t, fmt.Sprintf("GET %s #%d", path, n+1), p, users[b])
			}
		}
	}

	// An edit shows at once to its author, and to everyone once
	// MediaWiki's PURGE has reached Varnish: the anonymous copy, cached
	// where the gear caches pages, goes. Bob opened the editor before
	// Alice saved: opened again, it holds her text, not a stored copy.
	// (Visitors without cookies: anon may hold a session of its own by
	// now, from the special pages.)
	fresh := func() lampstack.Page { return w.browser(t, anon.IP).Get(page) }
	if p := fresh(); (p.XCache() == "HIT") != cachedRepeat(gear, true, true) || !strings.Contains(p.Body, pageText(gear, "Admin")) {
		t.Errorf("before the edit, an anonymous GET %s: X-Cache %s, want a cached copy of the old text where %s caches pages", page, p.XCache(), gear)
	}
	editPath := "/index.php?title=" + url.QueryEscape(strings.ReplaceAll(pageTitle(gear), " ", "_")) + "&action=edit"
	bob.Get(editPath)
	edit(t, alice, editPath, pageText(gear, "Alice"))
	if p := alice.Get(page); !strings.Contains(p.Body, pageText(gear, "Alice")) {
		t.Errorf("Alice does not see her edit at once (X-Cache %s)", p.XCache())
	}
	purged := func(text string) func() bool {
		return func() bool { return strings.Contains(fresh().Body, text) }
	}
	if !lampstack.WaitFor(10*time.Second, purged(pageText(gear, "Alice"))) {
		t.Errorf("an anonymous visitor does not see Alice's edit 10 s later: MediaWiki's PURGE did not reach the cache (X-Cache %s)", fresh().XCache())
	}
	if f := mustForm(t, "Bob's editor", bob.Get(editPath).Body, `editform`); strings.TrimSpace(f.fields.Get("wpTextbox1")) != pageText(gear, "Alice") {
		t.Errorf("Bob's editor, opened after Alice's edit, holds %q, want her text", f.fields.Get("wpTextbox1"))
	}
	fresh() // cached again where the gear caches pages
	edit(t, bob, editPath, pageText(gear, "Bob"))
	if !lampstack.WaitFor(10*time.Second, purged(pageText(gear, "Bob"))) {
		t.Errorf("an anonymous visitor does not see Bob's edit 10 s later (X-Cache %s)", fresh().XCache())
	}
	if p := alice.Get(page); !strings.Contains(p.Body, pageText(gear, "Bob")) {
		t.Errorf("Alice does not see Bob's edit (X-Cache %s)", p.XCache())
	}

	// A preference: Alice's pages in MonoBook from now on, Bob's and the
	// visitors' still in Vector.
	prefs := mustForm(t, "Alice's preferences", alice.Get("/index.php/Special:Preferences").Body, `mw-prefs-form`)
	prefs.fields.Set("wpskin", "monobook")
	if p := alice.Post(prefs.action, prefs.fields); p.Status != http.StatusOK || !strings.Contains(p.Body, "skin-monobook") {
		t.Errorf("saving Alice's preferences: status %d at %s, not in MonoBook:\n%.300s", p.Status, p.URL, p.Body)
	}
	for _, b := range []*lampstack.Browser{alice, bob, anon} {
		want := "skin-vector"
		if b == alice {
			want = "skin-monobook"
		}
		if p := b.Get(page); !strings.Contains(p.Body, want) || wikiUser(p) != users[b] {
			t.Errorf("%s's page after Alice's preference: %s missing, a page for %q (X-Cache %s)", b.IP, want, wikiUser(p), p.XCache())
		}
	}

	// Logout ends the session at MediaWiki and in the cache: the old
	// cookies, replayed, get nothing of Alice's.
	old := alice.CookieHeader("/")
	logout := mustForm(t, "logout form", alice.Get("/index.php/Special:UserLogout").Body, `UserLogout`)
	if p := alice.Post(logout.action, logout.fields); wikiUser(p) != "" {
		t.Errorf("logout: a page for %q at %s", wikiUser(p), p.URL)
	}
	replay := w.browser(t, alice.IP)
	for _, path := range []string{page, "/index.php/Special:Watchlist", "/index.php/Special:Preferences"} {
		wantUser(t, "after logout, GET "+path, alice.Do(http.MethodGet, path, nil, nil), "")
		wantUser(t, "replaying the old cookies, GET "+path, replay.Do(http.MethodGet, path, nil, map[string]string{"Cookie": old}), "")
		wantUser(t, "Bob after Alice's logout, GET "+path, bob.Do(http.MethodGet, path, nil, nil), "Bob")
	}
}

// edit saves text as the page's new text with the page's editor at path,
// and checks that the author lands on the page, showing it.
func edit(t *testing.T, b *lampstack.Browser, path, text string) {
	t.Helper()
	f := mustForm(t, "editor", b.Get(path).Body, `editform`)
	f.fields.Set("wpTextbox1", text)
	f.fields.Set("wpSave", "Save page")
	if p := b.Post(f.action, f.fields); p.Status != http.StatusOK || !strings.Contains(p.Body, text) || strings.Contains(p.URL, "action=") {
		t.Errorf("saving %q: status %d at %s (X-Cache %s), text shown: %v", text, p.Status, p.URL, p.XCache(), strings.Contains(p.Body, text))
	}
}

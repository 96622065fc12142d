package wordpress

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// stack is Debian's WordPress on Apache (with mod_php, or PHP-FPM behind
// the event MPM) and MariaDB, behind a varnishd with gearshift's three
// profiles loaded, all on loopback ports and under one temp dir.
type stack struct {
	v         *varnishtest.Varnish
	dir       string
	backend   profiles.Backend
	site      *site
	adminPass string
}

func startStack(t testing.TB, php lampstack.Stack) *stack {
	t.Helper()
	bin := need(t, php, "mariadbd", "mariadb-install-db", "mariadb", "apache2", "php", "/usr/share/wordpress/wp-settings.php",
		"/usr/share/wordpress/wp-content/themes/twentytwentyone/style.css")
	v := varnishtest.Start(t, varnishtest.Config{})
	dir := t.TempDir()
	lampstack.Searchable(t, dir)

	start := time.Now()
	db := lampstack.StartMariaDB(t, dir, bin)
	if _, err := db.Query("CREATE DATABASE wordpress"); err != nil {
		t.Fatal(err)
	}
	st := &stack{v: v, dir: dir, adminPass: lampstack.RandomHex(t, 12)}
	st.site = installWordPress(t, dir, "http://"+v.HTTPAddr, st.adminPass, db, bin)
	apachePort := lampstack.FreePort(t)
	startApache(t, php, dir, st.site.root, apachePort, bin)
	t.Logf("MariaDB, WordPress and Apache (%s) up in %s", php, time.Since(start).Round(time.Millisecond))

	cfg := config.Default()
	st.backend = profiles.BackendAt("127.0.0.1", apachePort)
	cfg.Backend = st.backend
	st.load(t, cfg, "")
	return st
}

// load renders and loads the three profiles of cfg as gs<suffix>-<gear>.
func (st *stack) load(t testing.TB, cfg *config.Config, suffix string) {
	t.Helper()
	lampstack.LoadProfiles(t, st.v, cfg, suffix)
}

func (st *stack) use(t testing.TB, name string) {
	t.Helper()
	lampstack.Use(t, st.v, name)
}

type (
	browser = lampstack.Browser
	page    = lampstack.Page
)

func (st *stack) browser(t *testing.T, ip string) *browser {
	return lampstack.NewBrowser(t, st.site.url, ip)
}

// login logs b in as the site's admin.
func login(b *browser, pass string) {
	b.T.Helper()
	b.Get("/wp-login.php") // sets wordpress_test_cookie
	p := b.Post("/wp-login.php", url.Values{"log": {adminUser}, "pwd": {pass}, "wp-submit": {"Log In"},
		"redirect_to": {b.Base + "/wp-admin/"}, "testcookie": {"1"}})
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Dashboard") {
		b.T.Fatalf("login: status %d at %s, no dashboard:\n%.500s", p.Status, p.URL, p.Body)
	}
}

const adminBar = `id="wpadminbar"`

var (
	logoutRE = regexp.MustCompile(`wp-login\.php\?action=logout&(?:amp;|#038;)?_wpnonce=([0-9a-f]+)`)
	nonceRE  = regexp.MustCompile(`^[0-9a-f]{10}$`)
)

// TestWordPress runs a real WordPress through each gear with browser-like
// clients, on mod_php and on PHP-FPM: what a visitor, a commenter and the
// site's admin do, and that none of them sees another's page.
func TestWordPress(t *testing.T) {
	lampstack.EachStack(t, func(t *testing.T, php lampstack.Stack) {
		st := startStack(t, php)
		for i, gear := range []string{"light", "moderate", "heavy"} {
			st.use(t, "gs-"+gear)
			ok := t.Run(gear, func(t *testing.T) { testGear(t, st, gear, i) })
			if !ok {
				t.Logf("PHP errors:\n%s", lampstack.LastLines(filepath.Join(filepath.Dir(st.site.root), "php-error.log"), 20))
			}
		}
	})
}

func testGear(t *testing.T, st *stack, gear string, i int) {
	post := st.site.postURL[gear]
	cachesPages := gear != "light"
	anon := st.browser(t, fmt.Sprintf("192.0.2.%d", 10+i))
	other := st.browser(t, fmt.Sprintf("192.0.2.%d", 20+i))

	t.Run("no redirect loop on a non-standard port", func(t *testing.T) {
		p := anon.Get("/")
		if !strings.Contains(p.Body, "gearshift test site") || strings.Contains(p.Body, adminBar) {
			t.Errorf("home page: no site title, or an admin bar, for an anonymous visitor:\n%.300s", p.Body)
		}
		if h := p.Header.Get("X-Gearshift-Profile"); h != gear {
			t.Errorf("X-Gearshift-Profile %q, want %q", h, gear)
		}
		// Redirects the site itself makes land: to the canonical path,
		// and to its host:port from a Host without the port (the same
		// cache key, so that redirect must not be cached).
		for _, path := range []string{
			fmt.Sprintf("/?p=%d", st.site.posts[gear]),
			strings.TrimSuffix(post, "/"),
			post + "?from=noport",
		} {
			if strings.Contains(path, "noport") {
				req, _ := http.NewRequest(http.MethodGet, st.site.url+path, nil)
				req.Host = "127.0.0.1" // net/http sends Request.Host, not a Host header
				resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != st.site.url+path {
					t.Errorf("GET %s with Host 127.0.0.1: status %d, Location %q; want WordPress's 301 to %s%s", path, resp.StatusCode, resp.Header.Get("Location"), st.site.url, path)
				}
			}
			p := st.browser(t, anon.IP).Do(http.MethodGet, path, nil, nil)
			if p.Status != http.StatusOK || !strings.Contains(p.URL, post) || !strings.Contains(p.Body, "The body of the "+gear+" post.") {
				t.Errorf("GET %s: status %d at %s; want the post at %s", path, p.Status, p.URL, post)
			}
		}
		if p := anon.Get("/"); cachesPages && p.XCache() != "HIT" {
			t.Errorf("second anonymous GET /: X-Cache %s, want HIT in %s", p.XCache(), gear)
		} else if !cachesPages && p.XCache() != "PASS" {
			t.Errorf("second anonymous GET /: X-Cache %s, want PASS in light", p.XCache())
		}
	})

	t.Run("password-protected post", func(t *testing.T) {
		if p := anon.Get(st.site.secret); strings.Contains(p.Body, secretContent) || !strings.Contains(p.Body, "post_password") {
			t.Fatalf("protected post shown without the password, or no form:\n%.300s", p.Body)
		}
		p := anon.Do(http.MethodPost, "/wp-login.php?action=postpass", url.Values{"post_password": {postPassword}, "Submit": {"Enter"}},
			map[string]string{"Referer": st.site.url + st.site.secret})
		if p.Status != http.StatusOK || !strings.Contains(p.Body, secretContent) {
			t.Errorf("after the password: status %d at %s, content not shown", p.Status, p.URL)
		}
		if p := anon.Get(st.site.secret); !strings.Contains(p.Body, secretContent) {
			t.Error("the password's cookie does not show the content")
		}
		if p := other.Get(st.site.secret); strings.Contains(p.Body, secretContent) {
			t.Errorf("another visitor got the unlocked post (X-Cache %s)", p.XCache())
		}
	})

	admin := st.browser(t, fmt.Sprintf("192.0.2.%d", 30+i))
	login(admin, st.adminPass)

	t.Run("wp-admin never cached", func(t *testing.T) {
		for n := 0; n < 2; n++ {
			p := admin.Get("/wp-admin/")
			if !strings.Contains(p.Body, "Dashboard") || p.XCache() != "PASS" {
				t.Errorf("GET /wp-admin/ as the admin: X-Cache %s, dashboard %v; want PASS and the dashboard", p.XCache(), strings.Contains(p.Body, "Dashboard"))
			}
		}
		if p := other.Do(http.MethodGet, "/wp-admin/", nil, nil); strings.Contains(p.Body, "Dashboard") || !strings.Contains(p.URL, "wp-login.php") {
			t.Errorf("an anonymous visitor at /wp-admin/ got %s, not the login form", p.URL)
		}
	})

	t.Run("admin bar only for the admin", func(t *testing.T) {
		for n := 0; n < 2; n++ {
			if p := admin.Get("/"); !strings.Contains(p.Body, adminBar) {
				t.Errorf("admin's home page %d without the admin bar (X-Cache %s)", n+1, p.XCache())
			}
			for _, b := range []*browser{anon, other} {
				if p := b.Get("/"); strings.Contains(p.Body, adminBar) {
					t.Errorf("a visitor got the admin bar (X-Cache %s)", p.XCache())
				}
			}
		}
	})

	t.Run("own comment shows at once", func(t *testing.T) {
		admin.Get(post)
		admin.Get(post) // cached per session in heavy
		text := "The admin comments in " + gear + " " + lampstack.RandomHex(t, 4)
		p := admin.Post("/wp-comments-post.php", url.Values{"comment": {text}, "comment_post_ID": {fmt.Sprint(st.site.posts[gear])}})
		if p.Status != http.StatusOK || !strings.Contains(p.Body, text) {
			t.Errorf("after posting: status %d at %s (X-Cache %s), own comment missing", p.Status, p.URL, p.XCache())
		}
		if p := admin.Get(post); !strings.Contains(p.Body, text) {
			t.Errorf("GET %s after posting: own comment missing (X-Cache %s)", post, p.XCache())
		}
		// Approved at once: others see it once their copy expires; the
		// test does not wait for that.
	})

	t.Run("a visitor's comment waits for approval", func(t *testing.T) {
		commenter := st.browser(t, fmt.Sprintf("192.0.2.%d", 40+i))
		commenter.Get(post)
		text := "A visitor comments in " + gear + " " + lampstack.RandomHex(t, 4)
		p := commenter.Post("/wp-comments-post.php", url.Values{"comment": {text}, "author": {"Visitor " + gear},
			"email": {"visitor-" + gear + "@example.invalid"}, "comment_post_ID": {fmt.Sprint(st.site.posts[gear])}})
		if p.Status != http.StatusOK || !strings.Contains(p.Body, text) || !strings.Contains(p.Body, "awaiting moderation") {
			t.Errorf("the author does not see the held comment: status %d at %s (X-Cache %s)", p.Status, p.URL, p.XCache())
		}
		for _, b := range []*browser{anon, other} {
			if p := b.Get(post); strings.Contains(p.Body, text) {
				t.Errorf("another visitor sees the held comment (X-Cache %s)", p.XCache())
			}
		}
		// mod_remoteip: WordPress saw the visitor's address, not Varnish's.
		ip, err := st.site.db.Query("SELECT comment_author_IP FROM wordpress.wp_comments WHERE comment_content = '" + text + "'")
		if err != nil || ip != commenter.IP {
			t.Errorf("comment_author_IP %q (%v), want the visitor's %s", ip, err, commenter.IP)
		}
	})

	t.Run("REST nonce not answered from a cached 401", func(t *testing.T) {
		for n := 0; n < 2; n++ {
			if p := admin.Do(http.MethodGet, "/wp-json/wp/v2/users/me", nil, nil); p.Status != http.StatusUnauthorized {
				t.Errorf("users/me without a nonce: status %d, want WordPress's 401", p.Status)
			}
		}
		nonce := strings.TrimSpace(admin.Get("/wp-admin/admin-ajax.php?action=rest-nonce").Body)
		if !nonceRE.MatchString(nonce) {
			t.Fatalf("rest-nonce: %q", nonce)
		}
		withNonce := map[string]string{"X-WP-Nonce": nonce}
		p := admin.Do(http.MethodGet, "/wp-json/wp/v2/users/me", nil, withNonce)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, `"slug":"admin"`) {
			t.Errorf("users/me with the nonce: status %d (X-Cache %s), want the admin:\n%.200s", p.Status, p.XCache(), p.Body)
		}

		admin.Get(post)
		admin.Get(post)
		title := "Renamed in " + gear + " " + lampstack.RandomHex(t, 4)
		req := admin.Do(http.MethodPost, fmt.Sprintf("/wp-json/wp/v2/posts/%d", st.site.posts[gear]), url.Values{"title": {title}}, withNonce)
		if req.Status != http.StatusOK || !strings.Contains(req.Body, title) {
			t.Fatalf("REST update: status %d:\n%.300s", req.Status, req.Body)
		}
		if p := admin.Get(post); !strings.Contains(p.Body, title) {
			t.Errorf("GET %s after the REST update: old title (X-Cache %s)", post, p.XCache())
		}
	})

	t.Run("PURGE", func(t *testing.T) {
		path := "/?purge-test=" + gear
		visitor := st.browser(t, anon.IP)
		visitor.Get(path)
		// A visitor's PURGE, forwarded by the proxy in front (its
		// X-Forwarded-For), is refused, though the proxy is in purge_acl.
		if p := visitor.Do("PURGE", path, nil, nil); p.Status != http.StatusForbidden {
			t.Errorf("a visitor's PURGE through the proxy: status %d, want 403", p.Status)
		}
		if cachesPages {
			if p := visitor.Get(path); p.XCache() != "HIT" {
				t.Errorf("after a visitor's PURGE: X-Cache %s, want HIT", p.XCache())
			}
		}
		// The site's own PURGE (a purge plugin's, from the server itself).
		server := st.browser(t, "")
		if p := server.Do("PURGE", path, nil, nil); p.Status != http.StatusOK {
			t.Errorf("PURGE from the server: status %d", p.Status)
		}
		want := "MISS"
		switch {
		case !cachesPages:
			want = "PASS"
		case gear == "heavy":
			want = "STALE" // profiles.soft_purge: heavy
		}
		if p := visitor.Get(path); p.XCache() != want {
			t.Errorf("after PURGE: X-Cache %s, want %s", p.XCache(), want)
		}
	})

	t.Run("logout logs out the cache", func(t *testing.T) {
		home := admin.Get("/")
		admin.Get("/")
		m := logoutRE.FindStringSubmatch(home.Body)
		if m == nil {
			t.Fatal("no logout link on the admin's home page")
		}
		old := admin.CookieHeader("/")
		p := admin.Get("/wp-login.php?action=logout&_wpnonce=" + m[1])
		if !strings.Contains(p.URL, "loggedout=true") {
			t.Errorf("logout ended at %s", p.URL)
		}
		if p := admin.Get("/"); strings.Contains(p.Body, adminBar) {
			t.Errorf("admin bar after logout (X-Cache %s)", p.XCache())
		}
		// The old cookie, replayed: WordPress no longer knows the session.
		replay := st.browser(t, admin.IP)
		if p := replay.Do(http.MethodGet, "/", nil, map[string]string{"Cookie": old}); p.Status != http.StatusOK || strings.Contains(p.Body, adminBar) {
			t.Errorf("old session cookie after logout: status %d, admin bar %v (X-Cache %s)", p.Status, strings.Contains(p.Body, adminBar), p.XCache())
		}
	})
}

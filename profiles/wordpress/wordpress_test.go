package wordpress

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// stack is Debian's WordPress on Apache + mod_php and MariaDB, behind a
// varnishd with gearshift's three profiles loaded, all on loopback ports
// and under one temp dir.
type stack struct {
	v         *varnishtest.Varnish
	dir       string
	backend   profiles.Backend
	site      *site
	adminPass string
}

func startStack(t testing.TB) *stack {
	t.Helper()
	bin := need(t, "mariadbd", "mariadb-install-db", "mariadb", "apache2", "php", "/usr/share/wordpress/wp-settings.php",
		"/usr/share/wordpress/wp-content/themes/twentytwentyone/style.css")
	v := varnishtest.Start(t, varnishtest.Config{})
	dir := t.TempDir()
	searchable(t, dir)

	start := time.Now()
	db := startMariaDB(t, dir, bin)
	st := &stack{v: v, dir: dir, adminPass: randomHex(t, 12)}
	st.site = installWordPress(t, dir, "http://"+v.HTTPAddr, st.adminPass, db, bin)
	apachePort := freePort(t)
	startApache(t, dir, st.site.root, apachePort, bin)
	t.Logf("MariaDB, WordPress and Apache up in %s", time.Since(start).Round(time.Millisecond))

	cfg := profiles.Default()
	st.backend = profiles.Backend{Host: "127.0.0.1", Port: apachePort}
	cfg.Backend = st.backend
	st.load(t, cfg, "")
	return st
}

// load renders and loads the three profiles of cfg as gs<suffix>-<gear>.
func (st *stack) load(t testing.TB, cfg *profiles.Config, suffix string) {
	t.Helper()
	for _, s := range state.All {
		text, err := profiles.Render(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(st.v.Dir, "gs"+suffix+"-"+s.String()+".vcl")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := st.v.Adm("vcl.load", "gs"+suffix+"-"+s.String(), file); err != nil {
			t.Fatalf("vcl.load %s: %v\n%s", s, err, out)
		}
	}
}

func (st *stack) use(t testing.TB, name string) {
	t.Helper()
	if out, err := st.v.Adm("vcl.use", name); err != nil {
		t.Fatalf("vcl.use %s: %v\n%s", name, err, out)
	}
}

// browser is a client with its own cookie jar, following redirects as a
// browser does (at most 10: a redirect loop is an error). Its requests
// carry X-Forwarded-For with the visitor's address, as from a proxy
// Varnish trusts no more than any client: Apache's mod_remoteip takes the
// address Varnish appends after it (loopback, trusted), then this one.
type browser struct {
	t    *testing.T
	base string
	jar  *cookiejar.Jar
	c    *http.Client
	ip   string
}

type page struct {
	status int
	header http.Header
	body   string
	url    string // after redirects
}

func (p page) xcache() string { return p.header.Get("X-Cache") }

func (st *stack) browser(t *testing.T, ip string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: st.site.url, jar: jar, ip: ip,
		c: &http.Client{Jar: jar, Timeout: 60 * time.Second}}
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.base + path
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.ip != "" {
		req.Header.Set("X-Forwarded-For", b.ip)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw), url: resp.Request.URL.String()}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	p := b.do(http.MethodGet, path, nil, nil)
	if p.status != http.StatusOK {
		b.t.Fatalf("GET %s: status %d (X-Cache %s) at %s\n%.300s", path, p.status, p.xcache(), p.url, p.body)
	}
	return p
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	return b.do(http.MethodPost, path, form, nil)
}

// cookieHeader is the Cookie header the browser sends to the site.
func (b *browser) cookieHeader() string {
	u, _ := url.Parse(b.base + "/")
	var parts []string
	for _, c := range b.jar.Cookies(u) {
		parts = append(parts, c.Name+"="+c.Value)
	}
	return strings.Join(parts, "; ")
}

func (b *browser) login(pass string) {
	b.t.Helper()
	b.get("/wp-login.php") // sets wordpress_test_cookie
	p := b.post("/wp-login.php", url.Values{"log": {adminUser}, "pwd": {pass}, "wp-submit": {"Log In"},
		"redirect_to": {b.base + "/wp-admin/"}, "testcookie": {"1"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "Dashboard") {
		b.t.Fatalf("login: status %d at %s, no dashboard:\n%.500s", p.status, p.url, p.body)
	}
}

const adminBar = `id="wpadminbar"`

var (
	logoutRE = regexp.MustCompile(`wp-login\.php\?action=logout&(?:amp;|#038;)?_wpnonce=([0-9a-f]+)`)
	nonceRE  = regexp.MustCompile(`^[0-9a-f]{10}$`)
)

// TestWordPress runs a real WordPress through each gear with browser-like
// clients: what a visitor, a commenter and the site's admin do, and that
// none of them sees another's page.
func TestWordPress(t *testing.T) {
	st := startStack(t)
	for i, gear := range []string{"light", "moderate", "heavy"} {
		st.use(t, "gs-"+gear)
		ok := t.Run(gear, func(t *testing.T) { testGear(t, st, gear, i) })
		if !ok {
			t.Logf("PHP errors:\n%s", lastLines(filepath.Join(filepath.Dir(st.site.root), "php-error.log"), 20))
		}
	}
}

func testGear(t *testing.T, st *stack, gear string, i int) {
	post := st.site.postURL[gear]
	cachesPages := gear != "light"
	anon := st.browser(t, fmt.Sprintf("192.0.2.%d", 10+i))
	other := st.browser(t, fmt.Sprintf("192.0.2.%d", 20+i))

	t.Run("no redirect loop on a non-standard port", func(t *testing.T) {
		p := anon.get("/")
		if !strings.Contains(p.body, "gearshift test site") || strings.Contains(p.body, adminBar) {
			t.Errorf("home page: no site title, or an admin bar, for an anonymous visitor:\n%.300s", p.body)
		}
		if h := p.header.Get("X-Gearshift-Profile"); h != gear {
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
			p := st.browser(t, anon.ip).do(http.MethodGet, path, nil, nil)
			if p.status != http.StatusOK || !strings.Contains(p.url, post) || !strings.Contains(p.body, "The body of the "+gear+" post.") {
				t.Errorf("GET %s: status %d at %s; want the post at %s", path, p.status, p.url, post)
			}
		}
		if p := anon.get("/"); cachesPages && p.xcache() != "HIT" {
			t.Errorf("second anonymous GET /: X-Cache %s, want HIT in %s", p.xcache(), gear)
		} else if !cachesPages && p.xcache() != "PASS" {
			t.Errorf("second anonymous GET /: X-Cache %s, want PASS in light", p.xcache())
		}
	})

	t.Run("password-protected post", func(t *testing.T) {
		if p := anon.get(st.site.secret); strings.Contains(p.body, secretContent) || !strings.Contains(p.body, "post_password") {
			t.Fatalf("protected post shown without the password, or no form:\n%.300s", p.body)
		}
		p := anon.do(http.MethodPost, "/wp-login.php?action=postpass", url.Values{"post_password": {postPassword}, "Submit": {"Enter"}},
			map[string]string{"Referer": st.site.url + st.site.secret})
		if p.status != http.StatusOK || !strings.Contains(p.body, secretContent) {
			t.Errorf("after the password: status %d at %s, content not shown", p.status, p.url)
		}
		if p := anon.get(st.site.secret); !strings.Contains(p.body, secretContent) {
			t.Error("the password's cookie does not show the content")
		}
		if p := other.get(st.site.secret); strings.Contains(p.body, secretContent) {
			t.Errorf("another visitor got the unlocked post (X-Cache %s)", p.xcache())
		}
	})

	admin := st.browser(t, fmt.Sprintf("192.0.2.%d", 30+i))
	admin.login(st.adminPass)

	t.Run("wp-admin never cached", func(t *testing.T) {
		for n := 0; n < 2; n++ {
			p := admin.get("/wp-admin/")
			if !strings.Contains(p.body, "Dashboard") || p.xcache() != "PASS" {
				t.Errorf("GET /wp-admin/ as the admin: X-Cache %s, dashboard %v; want PASS and the dashboard", p.xcache(), strings.Contains(p.body, "Dashboard"))
			}
		}
		if p := other.do(http.MethodGet, "/wp-admin/", nil, nil); strings.Contains(p.body, "Dashboard") || !strings.Contains(p.url, "wp-login.php") {
			t.Errorf("an anonymous visitor at /wp-admin/ got %s, not the login form", p.url)
		}
	})

	t.Run("admin bar only for the admin", func(t *testing.T) {
		for n := 0; n < 2; n++ {
			if p := admin.get("/"); !strings.Contains(p.body, adminBar) {
				t.Errorf("admin's home page %d without the admin bar (X-Cache %s)", n+1, p.xcache())
			}
			for _, b := range []*browser{anon, other} {
				if p := b.get("/"); strings.Contains(p.body, adminBar) {
					t.Errorf("a visitor got the admin bar (X-Cache %s)", p.xcache())
				}
			}
		}
	})

	t.Run("own comment shows at once", func(t *testing.T) {
		admin.get(post)
		admin.get(post) // cached per session in heavy
		text := "The admin comments in " + gear + " " + randomHex(t, 4)
		p := admin.post("/wp-comments-post.php", url.Values{"comment": {text}, "comment_post_ID": {fmt.Sprint(st.site.posts[gear])}})
		if p.status != http.StatusOK || !strings.Contains(p.body, text) {
			t.Errorf("after posting: status %d at %s (X-Cache %s), own comment missing", p.status, p.url, p.xcache())
		}
		if p := admin.get(post); !strings.Contains(p.body, text) {
			t.Errorf("GET %s after posting: own comment missing (X-Cache %s)", post, p.xcache())
		}
		// Approved at once: others see it once their copy expires; the
		// test does not wait for that.
	})

	t.Run("a visitor's comment waits for approval", func(t *testing.T) {
		commenter := st.browser(t, fmt.Sprintf("192.0.2.%d", 40+i))
		commenter.get(post)
		text := "A visitor comments in " + gear + " " + randomHex(t, 4)
		p := commenter.post("/wp-comments-post.php", url.Values{"comment": {text}, "author": {"Visitor " + gear},
			"email": {"visitor-" + gear + "@example.invalid"}, "comment_post_ID": {fmt.Sprint(st.site.posts[gear])}})
		if p.status != http.StatusOK || !strings.Contains(p.body, text) || !strings.Contains(p.body, "awaiting moderation") {
			t.Errorf("the author does not see the held comment: status %d at %s (X-Cache %s)", p.status, p.url, p.xcache())
		}
		for _, b := range []*browser{anon, other} {
			if p := b.get(post); strings.Contains(p.body, text) {
				t.Errorf("another visitor sees the held comment (X-Cache %s)", p.xcache())
			}
		}
		// mod_remoteip: WordPress saw the visitor's address, not Varnish's.
		ip, err := st.site.db.query("SELECT comment_author_IP FROM wordpress.wp_comments WHERE comment_content = '" + text + "'")
		if err != nil || ip != commenter.ip {
			t.Errorf("comment_author_IP %q (%v), want the visitor's %s", ip, err, commenter.ip)
		}
	})

	t.Run("REST nonce not answered from a cached 401", func(t *testing.T) {
		for n := 0; n < 2; n++ {
			if p := admin.do(http.MethodGet, "/wp-json/wp/v2/users/me", nil, nil); p.status != http.StatusUnauthorized {
				t.Errorf("users/me without a nonce: status %d, want WordPress's 401", p.status)
			}
		}
		nonce := strings.TrimSpace(admin.get("/wp-admin/admin-ajax.php?action=rest-nonce").body)
		if !nonceRE.MatchString(nonce) {
			t.Fatalf("rest-nonce: %q", nonce)
		}
		withNonce := map[string]string{"X-WP-Nonce": nonce}
		p := admin.do(http.MethodGet, "/wp-json/wp/v2/users/me", nil, withNonce)
		if p.status != http.StatusOK || !strings.Contains(p.body, `"slug":"admin"`) {
			t.Errorf("users/me with the nonce: status %d (X-Cache %s), want the admin:\n%.200s", p.status, p.xcache(), p.body)
		}

		admin.get(post)
		admin.get(post)
		title := "Renamed in " + gear + " " + randomHex(t, 4)
		req := admin.do(http.MethodPost, fmt.Sprintf("/wp-json/wp/v2/posts/%d", st.site.posts[gear]), url.Values{"title": {title}}, withNonce)
		if req.status != http.StatusOK || !strings.Contains(req.body, title) {
			t.Fatalf("REST update: status %d:\n%.300s", req.status, req.body)
		}
		if p := admin.get(post); !strings.Contains(p.body, title) {
			t.Errorf("GET %s after the REST update: old title (X-Cache %s)", post, p.xcache())
		}
	})

	t.Run("PURGE", func(t *testing.T) {
		path := "/?purge-test=" + gear
		visitor := st.browser(t, anon.ip)
		visitor.get(path)
		if p := visitor.do("PURGE", path, nil, nil); p.status != http.StatusOK {
			t.Errorf("PURGE: status %d", p.status)
		}
		want := "MISS"
		if !cachesPages {
			want = "PASS"
		}
		if p := visitor.get(path); p.xcache() != want {
			t.Errorf("after PURGE: X-Cache %s, want %s", p.xcache(), want)
		}
	})

	t.Run("logout logs out the cache", func(t *testing.T) {
		home := admin.get("/")
		admin.get("/")
		m := logoutRE.FindStringSubmatch(home.body)
		if m == nil {
			t.Fatal("no logout link on the admin's home page")
		}
		old := admin.cookieHeader()
		p := admin.get("/wp-login.php?action=logout&_wpnonce=" + m[1])
		if !strings.Contains(p.url, "loggedout=true") {
			t.Errorf("logout ended at %s", p.url)
		}
		if p := admin.get("/"); strings.Contains(p.body, adminBar) {
			t.Errorf("admin bar after logout (X-Cache %s)", p.xcache())
		}
		// The old cookie, replayed: WordPress no longer knows the session.
		replay := st.browser(t, admin.ip)
		if p := replay.do(http.MethodGet, "/", nil, map[string]string{"Cookie": old}); p.status != http.StatusOK || strings.Contains(p.body, adminBar) {
			t.Errorf("old session cookie after logout: status %d, admin bar %v (X-Cache %s)", p.status, strings.Contains(p.body, adminBar), p.xcache())
		}
	})
}

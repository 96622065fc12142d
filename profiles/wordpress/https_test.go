package wordpress

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/frontdoor"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// The two sites of TestWordPressHTTPS, on one Debian WordPress behind one
// Varnish: one served on https alone, one on plain http.
const (
	secureSite = "https://example.org"
	plainSite  = "http://plain.example.org"
)

// httpsStack is Debian's WordPress with an https site and a plain http
// one, behind a varnishd with gearshift's three profiles and Debian's
// hitch in front of it, all on loopback.
type httpsStack struct {
	v   *varnishtest.Varnish
	wp  *lampstack.DebianWordPress
	net lampstack.Net
}

// TestWordPressHTTPS runs Debian's WordPress behind real hitch (TLS, PROXY
// v2 to Varnish) in each gear, on mod_php: a site whose siteurl and home
// are https, anonymous and logged in, and beside it on the same Varnish,
// Apache and database a site on plain http.
//
// What the https site's admin sets, as docs/frontdoor.md says: the site's
// address (Settings, General: WordPress Address and Site Address, the
// siteurl and home options) on https; HTTPS=on for PHP when Varnish sends
// X-Forwarded-Proto: https, which Debian's own wp-config.php already does
// (elsewhere, a few lines in wp-config.php); and, for a site on https alone,
// Apache's 301 to https for what did not come over it
// (lampstack.HTTPSRedirect). The plain site sets nothing.
//
// Each gear: an https visitor is never sent to http and gets no http URL
// in the page, its links, scripts, styles and forms; an http visitor gets
// one redirect to https, and neither gets the other's copy (the scheme is
// in the cache key); login over https sets secure cookies and shows the
// admin their own bar and comment; the plain site is served on http with
// http links and no redirect.
func TestWordPressHTTPS(t *testing.T) {
	bin := lampstack.Need(t, lampstack.WordPressPackages+", hitch, varnish",
		slices.Concat(lampstack.WordPressPrograms, []string{"hitch", "varnishd"})...)
	start := time.Now()
	v := varnishtest.Start(t, varnishtest.Config{Proxy: true})
	hitch := frontdoor.RunHitch(t, v.ProxyAddr)
	wp := lampstack.StartDebianWordPress(t, t.TempDir(), []lampstack.DebianSite{
		{Host: "example.org", URL: secureSite, HTTPSOnly: true},
		{Host: "plain.example.org", URL: plainSite},
	}, lampstack.WordPressOptions{Posts: 3}, bin)
	t.Logf("Varnish, hitch, MariaDB, two WordPress sites and Apache up in %s", time.Since(start).Round(time.Millisecond))

	cfg := config.Default()
	cfg.Backend = profiles.BackendAt("127.0.0.1", wp.Apache.Port)
	lampstack.LoadProfiles(t, v, cfg, "")
	st := &httpsStack{v: v, wp: wp, net: lampstack.Net{
		Resolve: map[string]string{"example.org:443": hitch.Addr, "example.org:80": v.HTTPAddr, "plain.example.org:80": v.HTTPAddr},
		Roots:   frontdoor.Roots(t, hitch.Cert),
	}}
	for i, gear := range []string{"light", "moderate", "heavy"} {
		lampstack.Use(t, v, "gs-"+gear)
		t.Run(gear, func(t *testing.T) { testHTTPSGear(t, st, gear, i) })
	}
}

// visitor is a browser of its own for the site at base, connecting from
// 127.0.0.<n> (the gear's block of addresses, one per visitor), never
// from 127.0.0.1: hitch connects to Varnish from there, and a visitor at
// hitch's own address is taken for a local tool (docs/frontdoor.md).
func (st *httpsStack) visitor(t *testing.T, base string, gear, n int) *browser {
	return lampstack.NewVisitor(t, base, fmt.Sprintf("127.0.0.%d", 20+20*gear+n), st.net)
}

func testHTTPSGear(t *testing.T, st *httpsStack, gear string, i int) {
	cachesPages := gear != "light"
	post := st.wp.Posts["example.org"][i]

	t.Run("https visitor: no redirect, no http URL", func(t *testing.T) {
		anon := st.visitor(t, secureSite, i, 1)
		for _, path := range []string{"/", post, "/wp-login.php"} {
			p := anon.Get(path)
			if len(p.Redirects) != 0 || p.URL != secureSite+path {
				t.Errorf("GET %s over https: redirected %v, ended at %s", path, p.Redirects, p.URL)
			}
			if bad := insecureURLs(p.Body, "example.org"); len(bad) > 0 {
				t.Errorf("GET %s over https (X-Cache %s): http URLs in the page: %q", path, p.XCache(), bad)
			}
		}
		p := anon.Get(post)
		for _, want := range []string{
			`href='https://example.org/wp-content/themes/twentytwentyone/style.css`, // the theme's style
			`src="https://example.org/wp-content/themes/twentytwentyone/`,           // its script
			`action="https://example.org/wp-comments-post.php"`,                     // the comment form
		} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("GET %s over https: no %s in the page", post, want)
			}
		}
		if h := p.Header.Get("X-Gearshift-Profile"); h != gear {
			t.Errorf("X-Gearshift-Profile %q, want %q", h, gear)
		}
		if p := anon.Get("/"); cachesPages && p.XCache() != "HIT" {
			t.Errorf("second anonymous GET / over https: X-Cache %s, want HIT in %s", p.XCache(), gear)
		}
	})

	t.Run("http visitor gets one redirect, never the other copy", func(t *testing.T) {
		// http first: its redirect is not what an https visitor gets
		// after, for a page or a static file (cached in every gear).
		for _, path := range []string{"/?first=http-" + gear, "/wp-includes/css/buttons.min.css?first=http-" + gear} {
			p := st.visitor(t, "http://example.org", i, 2).Get(path)
			if len(p.Redirects) != 1 || p.Redirects[0].Status != http.StatusMovedPermanently || p.Redirects[0].To != secureSite+path {
				t.Errorf("GET %s over http: redirects %+v, want one 301 to %s%s", path, p.Redirects, secureSite, path)
			}
			for n := 0; n < 2; n++ {
				if p := st.visitor(t, secureSite, i, 3).Get(path); len(p.Redirects) != 0 {
					t.Errorf("GET %s over https after an http visitor: redirected %+v (X-Cache %s)", path, p.Redirects, p.XCache())
				}
			}
		}
		// https first: its page is not what an http visitor gets after,
		// even one that claims https (X-Forwarded-Proto from a visitor
		// is dropped).
		path := "/?first=https-" + gear
		st.visitor(t, secureSite, i, 3).Get(path)
		if p := st.visitor(t, secureSite, i, 3).Get(path); cachesPages && p.XCache() != "HIT" {
			t.Errorf("GET %s over https again: X-Cache %s, want HIT in %s", path, p.XCache(), gear)
		}
		for _, claim := range []map[string]string{nil, {"X-Forwarded-Proto": "https"}} {
			p := st.visitor(t, "http://example.org", i, 4).Do(http.MethodGet, path, nil, claim)
			if len(p.Redirects) != 1 || p.Redirects[0].From != "http://example.org"+path || p.Redirects[0].To != secureSite+path {
				t.Errorf("GET %s over http (headers %v) after an https visitor: redirects %+v, want one to https", path, claim, p.Redirects)
			}
		}
	})

	t.Run("login over https", func(t *testing.T) {
		admin := st.visitor(t, secureSite, i, 5)
		admin.Get("/wp-login.php") // sets wordpress_test_cookie
		p := admin.Post("/wp-login.php", url.Values{"log": {adminUser}, "pwd": {st.wp.Password}, "wp-submit": {"Log In"},
			"redirect_to": {secureSite + "/wp-admin/"}, "testcookie": {"1"}})
		if p.Status != http.StatusOK || p.URL != secureSite+"/wp-admin/" || !strings.Contains(p.Body, "Dashboard") {
			t.Fatalf("login over https: status %d at %s, redirects %+v", p.Status, p.URL, p.Redirects)
		}
		var set []string
		for _, r := range p.Redirects {
			if !strings.HasPrefix(r.To, "https://") {
				t.Errorf("login over https redirected to %s", r.To)
			}
			set = append(set, r.SetCookie...)
		}
		for _, name := range []string{"wordpress_sec_", "wordpress_logged_in_"} {
			if c := findCookie(set, name); c == "" || !strings.Contains(strings.ToLower(c), "; secure") {
				t.Errorf("login over https: cookie %s* %q, want one set Secure (all set: %q)", name, c, set)
			}
		}
		anon := st.visitor(t, secureSite, i, 6)
		for n := 0; n < 2; n++ {
			if p := admin.Get("/"); !strings.Contains(p.Body, adminBar) {
				t.Errorf("the admin's home page %d over https without the admin bar (X-Cache %s)", n+1, p.XCache())
			} else if bad := insecureURLs(p.Body, "example.org"); len(bad) > 0 {
				t.Errorf("the admin's home page over https: http URLs %q", bad)
			}
			if p := anon.Get("/"); strings.Contains(p.Body, adminBar) {
				t.Errorf("an anonymous https visitor got the admin bar (X-Cache %s)", p.XCache())
			}
		}

		page := admin.Get(post)
		admin.Get(post) // cached per session in heavy
		id := commentPostID.FindStringSubmatch(page.Body)
		if id == nil {
			t.Fatalf("no comment form on %s:\n%.300s", post, page.Body)
		}
		text := "The admin comments over https in " + gear + " " + lampstack.RandomHex(t, 4)
		p = admin.Post("/wp-comments-post.php", url.Values{"comment": {text}, "comment_post_ID": {id[1]}})
		if p.Status != http.StatusOK || !strings.Contains(p.Body, text) || !strings.HasPrefix(p.URL, secureSite+post) {
			t.Errorf("after commenting over https: status %d at %s (X-Cache %s), own comment missing", p.Status, p.URL, p.XCache())
		}
		if p := admin.Get(post); !strings.Contains(p.Body, text) {
			t.Errorf("GET %s after commenting: own comment missing (X-Cache %s)", post, p.XCache())
		}
		// The visitor's own address reached WordPress (PROXY v2 from
		// hitch, X-Forwarded-For from Varnish, mod_remoteip).
		if ip, err := st.wp.DB.Query("SELECT comment_author_IP FROM wordpress.wp0_comments WHERE comment_content = '" + text + "'"); err != nil || ip != admin.IP {
			t.Errorf("comment_author_IP %q (%v), want the visitor's %s", ip, err, admin.IP)
		}
	})

	t.Run("plain http site alongside", func(t *testing.T) {
		anon := st.visitor(t, plainSite, i, 7)
		plainPost := st.wp.Posts["plain.example.org"][i]
		p := anon.Get(plainPost)
		if len(p.Redirects) != 0 || !strings.Contains(p.Body, `action="http://plain.example.org/wp-comments-post.php"`) ||
			strings.Contains(p.Body, "https://plain.example.org") {
			t.Errorf("GET %s on the plain site: redirects %+v, or not its http URLs (X-Cache %s)", plainPost, p.Redirects, p.XCache())
		}
		if p := anon.Get(plainPost); cachesPages && p.XCache() != "HIT" {
			t.Errorf("second GET %s on the plain site: X-Cache %s, want HIT in %s", plainPost, p.XCache(), gear)
		}
		admin := st.visitor(t, plainSite, i, 8)
		cookie := lampstack.Login(admin, adminUser, st.wp.Password)
		if !strings.Contains(cookie, "wordpress_logged_in_") {
			t.Errorf("login on the plain site: cookies %q", cookie)
		}
		if p := admin.Get("/"); !strings.Contains(p.Body, adminBar) || len(p.Redirects) != 0 {
			t.Errorf("the plain site's admin: admin bar %v, redirects %+v", strings.Contains(p.Body, adminBar), p.Redirects)
		}
	})
}

var (
	commentPostID = regexp.MustCompile(`name=['"]comment_post_ID['"] value=['"](\d+)['"]`)
	// An http URL a browser would load or send to from an https page: a
	// src, href, srcset or form action, and the site's own address in
	// any form (JSON-escaped in an inline script too).
	insecureAttr = regexp.MustCompile(`(?i)\b(?:src|href|srcset|action)\s*=\s*["']?\s*http://[^"'\s>]*`)
)

// insecureURLs returns the http URLs of an https page of the site at host.
func insecureURLs(body, host string) []string {
	bad := insecureAttr.FindAllString(body, -1)
	own := regexp.MustCompile(`(?i)http:(?:\\?/){2}` + regexp.QuoteMeta(host) + `[^"'\s<>]*`)
	return append(bad, own.FindAllString(body, -1)...)
}

// findCookie returns the Set-Cookie line of set whose name starts with
// prefix, or "".
func findCookie(set []string, prefix string) string {
	for _, c := range set {
		if strings.HasPrefix(c, prefix) {
			return c
		}
	}
	return ""
}

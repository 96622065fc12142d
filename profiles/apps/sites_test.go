package apps

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// The sites of TestSites: Debian's WordPress, Debian's MediaWiki and the
// session-on-every-page site, name-based virtual hosts of one Apache,
// each a gearshift site; any other Host is the default site's, a page of
// Apache's first virtual host.
const (
	blogHost    = "blog.test"
	wikiHost    = "wiki.test"
	membersHost = "members.test"
	otherHost   = "other.test" // no site claims it: the default site
)

// sitesStack is one Varnish and one Apache serving several sites, driven
// as gearshift's daemon drives them: the router active, one label per
// site on its gear's profile, set by a varnish.Target.
type sitesStack struct {
	v       *varnishtest.Varnish
	target  *varnish.Target
	plan    varnish.Sites
	now     time.Time
	wp      *lampstack.DebianWordPress
	members map[string]string // the session site's users: name -> password
	data    string            // the session site's SITE_DATA
	wiki    map[string]string // the wiki's users: name -> password
	wikiSet string            // the wiki's LocalSettings.php
	bin     map[string]string
	net     lampstack.Net
	ips     int // visitors made so far
}

// TestSites runs three sites and the default one on one Apache and one
// varnishd with gearshift's default config plus a `sites` key (SPEC 15),
// and forces one site to heavy as `gearshift force heavy --site blog`
// does: the other sites keep their gear, headers and freshness, their
// signed-in users see their own writes, and no site is served another's
// pages. It runs in `make test` (about 15 s).
func TestSites(t *testing.T) {
	bin := lampstack.Need(t, lampstack.WordPressPackages+", mediawiki, php-intl, php-mbstring, php-xml, varnish",
		slices.Concat(lampstack.WordPressPrograms, []string{"/usr/share/mediawiki/maintenance/install.php", "varnishd"})...)
	start := time.Now()
	s := startSites(t, bin)
	t.Logf("Varnish, MariaDB, WordPress, MediaWiki, the session site and Apache up, sites loaded in %s", time.Since(start).Round(time.Millisecond))

	// Every site light: anonymous pages are fetched each time.
	before := map[string]http.Header{}
	for _, host := range []string{blogHost, wikiHost, membersHost, otherHost} {
		p := s.repeat(t, host, "/")
		s.wantGear(t, host, p, "light")
		if owner := pageOwner(p.Body); owner != host {
			t.Fatalf("GET / with Host %s: a page of %q, want the site's own (the page tells its site wrong)", host, owner)
		}
		if p.XCache() == "HIT" {
			t.Errorf("%s: a repeated anonymous GET / is a HIT with every site light", host)
		}
		before[host] = stableHeaders(p.Header)
	}

	// gearshift force heavy --site blog.
	s.shift(t, map[string]state.Gear{"blog": state.Heavy})

	t.Run("the forced site is heavy, its neighbours are not", func(t *testing.T) {
		blogPage := s.repeat(t, blogHost, "/")
		s.wantGear(t, blogHost, blogPage, "heavy")
		if blogPage.XCache() != "HIT" {
			t.Errorf("%s in heavy: a repeated anonymous GET / is %q, want a HIT", blogHost, blogPage.XCache())
		}
		for _, host := range []string{wikiHost, membersHost, otherHost} {
			p := s.repeat(t, host, "/")
			s.wantGear(t, host, p, "light")
			if owner := pageOwner(p.Body); owner != host {
				t.Errorf("GET / with Host %s while blog's is cached: a page of %q", host, owner)
			}
			if got := stableHeaders(p.Header); !headersEqual(got, before[host]) {
				t.Errorf("%s: the headers of a repeated anonymous GET / changed when blog went heavy:\nbefore %v\nafter  %v", host, before[host], got)
			}
		}
	})

	t.Run("a neighbour's change on the backend shows at once", func(t *testing.T) {
		s.wikiFreshness(t, true)
		s.blogFreshness(t, false) // heavy: its copy, as it should
		// The session site: a comment written straight into its files.
		article := "/article.php?id=7"
		s.repeat(t, membersHost, article)
		text := "written on the backend " + lampstack.RandomHex(t, 4)
		lampstack.WriteFile(t, filepath.Join(s.data, "comments-7.json"), fmt.Sprintf("[%q]", text))
		if p := s.visitor(t, membersHost).Get(article); !strings.Contains(p.Body, text) || p.XCache() == "HIT" {
			t.Errorf("%s%s after a change on the backend: X-Cache %s, the change shown: %v; want a fresh page", membersHost, article, p.XCache(), strings.Contains(p.Body, text))
		}
	})

	t.Run("a neighbour's signed-in users see their own writes", func(t *testing.T) {
		s.wikiEdit(t)
		s.sessionNote(t)
		// And the forced site's own, in heavy.
		s.wordPressComment(t, blogHost, "heavy")
	})

	t.Run("no site gets another's pages", func(t *testing.T) {
		// Every site heavy: one cache holds each site's front page (the
		// session site's, which sets a cookie, excepted), and the same
		// URL of each Host is that site's own page, from the first
		// request on (blog's is in the cache already).
		s.shift(t, map[string]state.Gear{"blog": state.Heavy, "wiki": state.Heavy, "members": state.Heavy, "default": state.Heavy})
		for round := 1; round <= 2; round++ {
			for _, host := range []string{blogHost, wikiHost, membersHost, otherHost} {
				p := s.visitor(t, host).Do(http.MethodGet, "/", nil, nil)
				s.wantGear(t, host, p, "heavy")
				if owner := pageOwner(p.Body); owner != host {
					t.Errorf("GET / #%d with Host %s (X-Cache %s): a page of %q", round, host, p.XCache(), owner)
				}
				if hit := p.XCache() == "HIT"; round == 2 && hit != (host != membersHost) {
					t.Errorf("GET / #%d with Host %s: X-Cache %s, want each site's own copy kept, the session site's none", round, host, p.XCache())
				}
			}
		}
	})

	t.Run("control: a heavy neighbour fails the freshness check", func(t *testing.T) {
		// With the wiki heavy too, its page keeps the cached copy: the check
		// above tells a light neighbour from a heavy one.
		s.wikiFreshness(t, false)
	})
}

// startSites starts the stack: MariaDB, Debian's WordPress for the blog,
// Debian's MediaWiki, the session site's files, one Apache with a
// virtual host for each, a varnishd, and the sites' profiles, router and
// labels in it, every site light.
func startSites(t testing.TB, bin map[string]string) *sitesStack {
	t.Helper()
	v := varnishtest.Start(t, varnishtest.Config{})
	dir := t.TempDir()
	wp := lampstack.StartDebianWordPress(t, dir, []lampstack.DebianSite{{Host: blogHost, URL: "http://" + blogHost}},
		lampstack.WordPressOptions{Posts: 2}, bin)
	s := &sitesStack{v: v, wp: wp, members: map[string]string{"alice": lampstack.RandomHex(t, 12)},
		data: filepath.Join(dir, "site-data"), now: time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC),
		net: lampstack.Net{Resolve: map[string]string{}}, bin: bin}
	s.installWiki(t, dir)
	for _, host := range []string{blogHost, wikiHost, membersHost, otherHost} {
		s.net.Resolve[host+":80"] = v.HTTPAddr
	}

	// The session site's tree and data, and the default site's one page.
	sessionRoot := filepath.Join(dir, "session-site")
	files, err := filepath.Glob(filepath.Join("testdata", "sessionsite", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata/sessionsite: %v", err)
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lampstack.WriteFile(t, filepath.Join(sessionRoot, filepath.Base(f)), string(text))
	}
	lampstack.WriteFile(t, filepath.Join(s.data, "users.json"), fmt.Sprintf(`{"alice": %q}`, s.members["alice"]))
	os.Chmod(s.data, 0o777) // written by Apache's user
	defaultRoot := filepath.Join(dir, "default-site")
	lampstack.WriteFile(t, filepath.Join(defaultRoot, "index.php"), "<?php echo '<p>The server\\'s own page, for '.htmlspecialchars($_SERVER['HTTP_HOST']).'</p>';\n")

	// One Apache for them all: the WordPress Apache again, with a
	// name-based virtual host per tree (the first, the default site's,
	// answers any other Host).
	lampstack.StopApache(t, wp.Apache)
	a := wp.Apache
	port := fmt.Sprint(a.Port)
	a.Root, a.Probe, a.Directory = defaultRoot, "/", ""
	a.Conf += fmt.Sprintf(`<Directory %[1]q>
    Options FollowSymLinks
    Require all granted
%[2]s
</Directory>
<Directory %[3]q>
    Require all granted
</Directory>
<Directory /usr/share/mediawiki>
    Require all granted
</Directory>
<VirtualHost 127.0.0.1:%[4]s>
    ServerName default.invalid
    DocumentRoot %[5]q
</VirtualHost>
<VirtualHost 127.0.0.1:%[4]s>
    ServerName %[6]s
    DocumentRoot %[1]q
</VirtualHost>
<VirtualHost 127.0.0.1:%[4]s>
    ServerName %[7]s
    DocumentRoot /usr/share/mediawiki
    SetEnv MW_CONFIG_FILE %[10]s
</VirtualHost>
<VirtualHost 127.0.0.1:%[4]s>
    ServerName %[8]s
    DocumentRoot %[3]q
    SetEnv SITE_DATA %[9]s
</VirtualHost>
`, wp.Root, wp.Apache.Directory, sessionRoot, port, defaultRoot, blogHost, wikiHost, membersHost, s.data, s.wikiSet)
	lampstack.StartApache(t, a, bin)

	// gearshift's default config with the sites, and its plan as the
	// daemon makes it: one set of profiles (no site overrides any), the
	// router, a label per site.
	cfg := config.Default()
	cfg.Backend = profiles.BackendAt("127.0.0.1", a.Port)
	cfg.Varnish.Targets = []config.Target{{Admin: v.AdminAddr, SecretFile: v.SecretFile}}
	cfg.Varnish.Timeout = timefmt.Duration(30 * time.Second) // VCL compiles on a busy machine
	cfg.Sites = []config.Site{{Name: "blog", Hosts: []string{blogHost}}, {Name: "wiki", Hosts: []string{wikiHost}},
		{Name: "members", Hosts: []string{membersHost}}}
	set, err := profiles.Build(cfg.Site())
	if err != nil {
		t.Fatal(err)
	}
	var routes []profiles.Route
	for _, site := range cfg.SiteList(cfg.Site().Backend.MaxConnections) {
		routes = append(routes, profiles.Route{Site: site.Name, Hosts: site.Hosts})
		s.plan.Labels = append(s.plan.Labels, varnish.SiteLabel{Site: site.Name})
	}
	if len(routes) != 4 {
		t.Fatalf("the config's sites are %v, want default and the three", routes)
	}
	if s.plan.Router, err = profiles.Router(routes); err != nil {
		t.Fatal(err)
	}
	s.plan.Sets = []*profiles.Set{&set}
	s.target = varnish.New(v.AdminAddr, v.SecretFile, varnish.DialAdmin(30*time.Second), varnish.SettingsOf(cfg), varnish.Metrics{
		Errors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "errors"}),
		Switches: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "switches"}),
	}, zap.NewNop())
	t.Cleanup(s.target.Close)
	s.shift(t, nil)
	return s
}

// shift puts each site on the gear gears names (light when it names none)
// and syncs Varnish, as the daemon's reconciler does.
func (s *sitesStack) shift(t testing.TB, gears map[string]state.Gear) {
	t.Helper()
	for i, l := range s.plan.Labels {
		g, ok := gears[l.Site]
		if !ok {
			g = state.Light
		}
		s.plan.Labels[i].Gear = g
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.target.SyncSites(ctx, s.now, &s.plan)
	s.now = s.now.Add(time.Second)
	if st := s.target.SitesStatus(&s.plan); !st.InSync || st.Error != "" {
		t.Fatalf("after a sync to %v: %+v, want in sync", gears, st)
	}
}

// visitor is a new anonymous browser of host, from an address of its own.
func (s *sitesStack) visitor(t testing.TB, host string) *lampstack.Browser {
	s.ips++
	return lampstack.NewVisitor(t, "http://"+host, fmt.Sprintf("127.0.0.%d", 30+s.ips), s.net)
}

// repeat fetches path of host twice, each time as a new anonymous visitor,
// and returns the second answer.
func (s *sitesStack) repeat(t testing.TB, host, path string) lampstack.Page {
	t.Helper()
	s.visitor(t, host).Get(path)
	return s.visitor(t, host).Get(path)
}

// wantGear checks that p of host was made by gear's profile.
func (s *sitesStack) wantGear(t testing.TB, host string, p lampstack.Page, gear string) {
	t.Helper()
	if got := p.Header.Get("X-Gearshift-Profile"); got != gear {
		t.Errorf("%s: answered by %q's profile (X-Cache %s), want %s's", host, got, p.XCache(), gear)
	}
}

// blogFreshness changes the title of the blog's first post in the
// database and checks that an anonymous visitor sees the change at once
// (fresh) or the copy from before it (not fresh: a HIT).
func (s *sitesStack) blogFreshness(t testing.TB, fresh bool) {
	t.Helper()
	post := s.wp.Posts[blogHost][0]
	s.repeat(t, blogHost, post)
	title := "Changed on the backend " + lampstack.RandomHex(t, 4)
	if _, err := s.wp.DB.Query(fmt.Sprintf("UPDATE wordpress.wp0_posts SET post_title = '%s' WHERE post_name = '%s'", title, strings.Trim(post, "/"))); err != nil {
		t.Fatal(err)
	}
	wantFresh(t, blogHost+post, s.visitor(t, blogHost).Get(post), title, fresh)
}

// wikiFreshness changes the wiki's page with MediaWiki's edit.php and
// checks as blogFreshness does. The wiki's pages say a CDN may keep them
// ($wgUseCdn), but it knows no CDN to purge: a change shows where its
// pages are not kept, not by a PURGE.
func (s *sitesStack) wikiFreshness(t testing.TB, fresh bool) {
	t.Helper()
	page := wikiPath(wikiPage)
	s.repeat(t, wikiHost, page)
	text := "Changed on the backend " + lampstack.RandomHex(t, 4)
	s.wikiPHP(t, text, "edit.php", "--user=Admin", "--summary=changed", wikiPage)
	wantFresh(t, wikiHost+page, s.visitor(t, wikiHost).Get(page), text, fresh)
}

// wantFresh checks that p, fetched after text went in on the backend,
// shows it and is no HIT when fresh, and is a HIT without it otherwise.
func wantFresh(t testing.TB, what string, p lampstack.Page, text string, fresh bool) {
	t.Helper()
	if shown := strings.Contains(p.Body, text); shown != fresh || (p.XCache() == "HIT") == fresh {
		t.Errorf("%s after a change on the backend: X-Cache %s, the change shown: %v; want shown: %v", what, p.XCache(), shown, fresh)
	}
}

// wikiPage is the wiki's page the test reads and changes.
const wikiPage = "Neighbour page"

// installWiki installs Debian's MediaWiki for http://wiki.test in the
// stack's MariaDB, its settings under dir, with Admin and Alice, and
// wikiPage.
func (s *sitesStack) installWiki(t testing.TB, dir string) {
	t.Helper()
	conf := filepath.Join(dir, "mediawiki")
	cache := filepath.Join(conf, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(cache, 0o777) // written by Apache's user and by the maintenance scripts
	s.wiki = map[string]string{"Admin": lampstack.RandomHex(t, 12), "Alice": lampstack.RandomHex(t, 12)}
	s.wikiPHP(t, "", "install.php", "--confpath="+conf, "--dbserver=127.0.0.1:"+fmt.Sprint(s.wp.DB.Port),
		"--dbname="+wikiDB, "--dbuser=root", "--dbpass=", "--installdbuser=root", "--installdbpass=",
		"--server=http://"+wikiHost, "--scriptpath=", "--pass="+s.wiki["Admin"], "--skins=Vector", wikiName, "Admin")
	s.wikiSet = filepath.Join(conf, "LocalSettings.php")
	text, err := os.ReadFile(s.wikiSet)
	if err != nil {
		t.Fatal(err)
	}
	lampstack.WriteFile(t, s.wikiSet, string(text)+fmt.Sprintf("\n$wgUsePathInfo = true;\n$wgUseCdn = true;\n$wgCdnServers = [];\n$wgCacheDirectory = %q;\n$wgEnableEmail = false;\n", cache))
	s.wikiPHP(t, "", "createAndPromote.php", "Alice", s.wiki["Alice"])
	s.wikiPHP(t, pageText("light", "Admin"), "edit.php", "--user=Admin", "--summary=created", wikiPage)
}

// wikiPHP runs a MediaWiki maintenance script with the wiki's settings
// (none before install.php wrote them) and stdin.
func (s *sitesStack) wikiPHP(t testing.TB, stdin, script string, args ...string) {
	t.Helper()
	(&wiki{}).php(t, s.bin, s.wikiSet, stdin, script, args...)
}

// wikiEdit logs Alice in on the wiki, edits wikiPage and checks that her
// next view of it shows her text.
func (s *sitesStack) wikiEdit(t *testing.T) {
	t.Helper()
	alice := s.visitor(t, wikiHost)
	f := mustForm(t, "login form", alice.Get("/index.php/Special:UserLogin").Body, `userlogin`)
	f.fields.Set("wpName", "Alice")
	f.fields.Set("wpPassword", s.wiki["Alice"])
	f.fields.Set("wploginattempt", "Log in")
	if p := alice.Post(f.action, f.fields); p.Status != http.StatusOK || wikiUser(p) != "Alice" {
		t.Fatalf("Alice's login on %s: status %d at %s, a page for %q", wikiHost, p.Status, p.URL, wikiUser(p))
	}
	text := "Alice writes while blog is heavy " + lampstack.RandomHex(t, 4)
	edit(t, alice, "/index.php?title="+url.QueryEscape(strings.ReplaceAll(wikiPage, " ", "_"))+"&action=edit", text)
	p := alice.Get(wikiPath(wikiPage))
	s.wantGear(t, wikiHost+" (signed in)", p, "light")
	if !strings.Contains(p.Body, text) || wikiUser(p) != "Alice" {
		t.Errorf("%s: Alice's next view of the page misses her edit (X-Cache %s, a page for %q)", wikiHost, p.XCache(), wikiUser(p))
	}
}

// wordPressComment signs the admin in on host, posts a comment and checks
// that the admin's next view of the post, made by gear's profile, shows
// it.
func (s *sitesStack) wordPressComment(t *testing.T, host, gear string) {
	t.Helper()
	admin := s.visitor(t, host)
	lampstack.Login(admin, "admin", s.wp.Password)
	post := s.wp.Posts[host][1]
	id := regexp.MustCompile(`name=['"]comment_post_ID['"] value=['"](\d+)['"]`).FindStringSubmatch(admin.Get(post).Body)
	if id == nil {
		t.Fatalf("%s%s: no comment form for the signed-in admin", host, post)
	}
	text := "The admin comments while blog is heavy " + lampstack.RandomHex(t, 4)
	if p := admin.Post("/wp-comments-post.php", url.Values{"comment": {text}, "comment_post_ID": {id[1]}}); p.Status != http.StatusOK || !strings.Contains(p.Body, text) {
		t.Errorf("%s: after commenting, status %d at %s (X-Cache %s), own comment missing", host, p.Status, p.URL, p.XCache())
	}
	p := admin.Get(post)
	s.wantGear(t, host+" (signed in)", p, gear)
	if !strings.Contains(p.Body, text) {
		t.Errorf("%s%s: the admin's next view misses their comment (X-Cache %s, profile %s)", host, post, p.XCache(), p.Header.Get("X-Gearshift-Profile"))
	}
}

// sessionNote signs alice in on the session site, saves a note and checks
// that her next view of her account shows it.
func (s *sitesStack) sessionNote(t *testing.T) {
	t.Helper()
	alice := s.visitor(t, membersHost)
	f := mustForm(t, "sign-in form", alice.Get("/login.php").Body, `id="login"`)
	f.fields.Set("name", "alice")
	f.fields.Set("password", s.members["alice"])
	if p := alice.Post("/login.php", f.fields); p.Status != http.StatusOK || siteUser(p) != "alice" {
		t.Fatalf("alice's sign-in on %s: status %d at %s, a page for %q", membersHost, p.Status, p.URL, siteUser(p))
	}
	note := "A note by alice while blog is heavy " + lampstack.RandomHex(t, 4)
	f = mustForm(t, "note form", alice.Get("/account.php").Body, `id="note-form"`)
	f.fields.Set("note", note)
	if p := alice.Post("/account.php", f.fields); p.Status != http.StatusOK {
		t.Errorf("%s: saving alice's note: status %d at %s (X-Cache %s)\n%.300s", membersHost, p.Status, p.URL, p.XCache(), p.Body)
	}
	p := alice.Get("/account.php")
	s.wantGear(t, membersHost+" (signed in)", p, "light")
	if !strings.Contains(p.Body, `<p id="note">`+note) || siteUser(p) != "alice" {
		t.Errorf("%s: alice's next view of her account misses her note (X-Cache %s, a page for %q)", membersHost, p.XCache(), siteUser(p))
	}
}

// pageOwner tells which site made a front page: the wiki's name,
// the blog's links, the session site's sign-in link, or the default site's
// own page naming the Host; "?" when it cannot tell.
func pageOwner(body string) string {
	switch {
	case strings.Contains(body, wikiName):
		return wikiHost
	case strings.Contains(body, "http://"+blogHost+"/"):
		return blogHost
	case strings.Contains(body, `<p id="who">`):
		return membersHost
	}
	if m := regexp.MustCompile(`The server's own page, for ([^<]*)</p>`).FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return "?"
}

// stableHeaders are the response's header fields that do not change from
// one answer to the next of the same page: without Date, Age, X-Varnish,
// Content-Length and MediaWiki's X-Request-Id, and with only the names of the cookies set.
func stableHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		switch k {
		case "Date", "Age", "X-Varnish", "Content-Length", "X-Request-Id":
			continue
		case "Set-Cookie":
			for _, v := range vs {
				name, _, _ := strings.Cut(v, "=")
				out.Add(k, name)
			}
			sort.Strings(out[k])
			continue
		}
		out[k] = vs
	}
	return out
}

// headersEqual tells whether a and b hold the same fields and values.
func headersEqual(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

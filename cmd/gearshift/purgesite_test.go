package main

import (
	"bufio"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

const sitesDoc = `sites:
  - name: shop
    hosts: [shop.example.com, www.shop.example.com]
    profiles: { drop_query_params: [ref] }
  - name: wiki
    hosts: [wiki.example.org]
  - name: blogs
    hosts: ['*.blogs.example.net']
`

// banRecorder is a Varnish admin port that takes every command and keeps
// the ban commands it was sent.
type banRecorder struct {
	mu   sync.Mutex
	bans []string
	addr string
}

func startBanRecorder(t *testing.T) *banRecorder {
	r := &banRecorder{}
	r.addr = varnishtest.StartFakeAdmin(t, func(_ int, conn net.Conn) {
		io.WriteString(conn, varnishtest.Frame(200, "fake varnish\n"))
		rd := bufio.NewReader(conn)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(line, "ban ") {
				r.mu.Lock()
				r.bans = append(r.bans, strings.TrimSuffix(line, "\n"))
				r.mu.Unlock()
			}
			io.WriteString(conn, varnishtest.Frame(200, ""))
		}
	}).Addr
	return r
}

func (r *banRecorder) taken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bans...)
}

func TestPurgeSite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		ban      []string // what the ban line holds
		not      []string // what it must not
		stderr   string
		sentNone bool
	}{
		{name: "tag, every site", args: []string{"--tag", "product-42"}, ban: []string{"obj.http.xkey ~"}, not: []string{"X-Gs-Host"}},
		{name: "tag, one site", args: []string{"--tag", "product-42", "--site", "shop"},
			ban: []string{"obj.http.xkey ~", `&& obj.http.X-Gs-Host ~ (?i)^(shop\\.example\\.com)(:[0-9]+)?$`}},
		{name: "tag, a site of globs", args: []string{"--tag", "t", "--site", "blogs"},
			ban: []string{`obj.http.X-Gs-Host ~ (?i)^([^.]+(\\.[^.]+)*\\.blogs\\.example\\.net|blogs\\.example\\.net)(:[0-9]+)?$`}},
		{name: "tag, the default site", args: []string{"--tag", "t", "--site", "default"},
			ban: []string{`obj.http.X-Gs-Host !~ (?i)^(shop\\.example\\.com|wiki\\.example\\.org|`}},
		{name: "tag, an unknown site", args: []string{"--tag", "t", "--site", "nosuch"}, code: 1, sentNone: true,
			stderr: "gearshift: no site \"nosuch\" in the config (gearshift sites lists them).\n"},
		{name: "URL of the site", args: []string{"https://www.shop.example.com/p?ref=x&id=2", "--site", "shop"},
			ban: []string{"obj.http.X-Gs-Host == shop.example.com && obj.http.X-Gs-Url == /p?id=2"}},
		{name: "URL with its site's own profiles", args: []string{"https://shop.example.com/p?ref=x&id=2"},
			ban: []string{"obj.http.X-Gs-Url == /p?id=2"}},
		{name: "URL of another site", args: []string{"https://shop.example.com/p", "--site", "wiki"}, code: 2, sentNone: true,
			stderr: "gearshift: https://shop.example.com/p is a page of site shop, not of wiki: purge it with --site shop, or without --site.\n"},
		{name: "URL of the default site", args: []string{"http://example.com/", "--site", "shop"}, code: 2, sentNone: true,
			stderr: "is a page of site default, not of shop"},
		{name: "URL, an unknown site", args: []string{"http://shop.example.com/", "--site", "nosuch"}, code: 1, sentNone: true,
			stderr: "no site \"nosuch\""},
		{name: "not a URL, with a site", args: []string{"ftp://shop.example.com/", "--site", "shop"}, code: 2, sentNone: true,
			stderr: "is not a URL to purge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := startBanRecorder(t)
			path, _ := configtest.File(t, "varnish:\n  targets:\n    - admin: "+rec.addr+"\n      secret_file: $DIR/secret\n"+sitesDoc)
			code, stdout, stderr := runMain(t, append(append([]string{"purge"}, tc.args...), "--config", path)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) || strings.Count(stderr, "\n") > 1 {
				t.Fatalf("exit %d, stderr %q, stdout %q; want %d and %q", code, stderr, stdout, tc.code, tc.stderr)
			}
			bans := rec.taken()
			if tc.sentNone {
				if len(bans) != 0 {
					t.Errorf("sent %q", bans)
				}
				return
			}
			if len(bans) != 1 {
				t.Fatalf("sent %q, want one ban", bans)
			}
			for _, w := range tc.ban {
				if !strings.Contains(bans[0], w) {
					t.Errorf("ban %s lacks %s", bans[0], w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(bans[0], w) {
					t.Errorf("ban %s holds %s", bans[0], w)
				}
			}
		})
	}
}

// The condition of each site holds for the Host its pages are kept under
// (as the profiles' hostKey makes it) and for no other site's, under
// normalize_host and without.
func TestSiteHostCondition(t *testing.T) {
	for _, normalize := range []bool{true, false} {
		cfg, err := config.ParseSettings([]byte(sitesDoc + "  - name: news\n    hosts: ['*.news.example', 'www.news.example']\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Profiles.NormalizeHost = normalize
		hosts := []string{
			"shop.example.com", "www.shop.example.com", "Shop.Example.COM:8080", "wiki.example.org",
			"a.blogs.example.net", "a.b.blogs.example.net", "www.blogs.example.net", "blogs.example.net",
			"x.news.example", "www.news.example", "news.example", "example.com", "www.example.com", "notshop.example.com",
		}
		for _, host := range hosts {
			// The page's X-Gs-Host, as the profiles keep it.
			key := host
			if normalize {
				key = strings.TrimPrefix(strings.ToLower(regexp.MustCompile(`:[0-9]+$`).ReplaceAllString(host, "")), "www.")
			}
			owner := cfg.SiteOf(host)
			for _, s := range cfg.SiteList(0) {
				cond := siteHostCondition(cfg, s.Name)
				if len(cond) != 3 {
					t.Fatalf("%s: condition %q", s.Name, cond)
				}
				matched := regexp.MustCompile(cond[2]).MatchString(key)
				if cond[1] == "!~" {
					matched = !matched
				}
				// Under normalize_host, www.NAME and NAME are one page
				// in the cache: a site that claims either reaches it,
				// the default site never.
				shared := normalize && cfg.SiteOf("www."+key) != cfg.SiteOf(key)
				if s.Name == owner && !matched && !(shared && owner == config.DefaultSite) {
					t.Errorf("normalize %v: %s (kept as %s) is a host of %s, not matched by %q", normalize, host, key, s.Name, cond)
				}
				if s.Name != owner && matched && !shared {
					t.Errorf("normalize %v: %s (kept as %s) is a host of %s, matched by %s's %q", normalize, host, key, owner, s.Name, cond)
				}
			}
		}
	}
}

package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// threeSites is a good config of three sites beside the default: a shop
// with its own pool, cart and token, a wiki with its session cookie, and a
// blog network on a glob sharing the server's profiles.
const threeSites = `backend: { max_connections: 40 }
sensor:
  phpfpm:
    pools:
      - { name: www, socket: /run/php/www.sock }
      - { name: shop, socket: /run/php/shop.sock }
sites:
  - name: shop
    hosts: [shop.example.com, WWW.Shop.Example.COM]
    phpfpm_pool: shop
    max_connections: 12
    purge_token_file: '{{dir}}/shop-token'
    profiles:
      never_cache: ['^/cart', '^/checkout']
      heavy_min_ttl: 5m
  - name: wiki
    hosts: [wiki.example.org]
    profiles:
      session_cookies: ['*_session', '*UserID']
      guest_pages: 'off'
  - name: blogs
    hosts: ['*.blogs.example.net', blogs.example.net]
  - name: default
    max_connections: 8
`

// parseSites parses doc (base and the fixture's names replaced) with a
// purge token for the shop.
func parseSites(tb testing.TB, doc string) (*Config, error) {
	tb.Helper()
	r := fixture(tb)
	dir := r.Replace("{{dir}}")
	if err := os.WriteFile(filepath.Join(dir, "shop-token"), []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return Parse([]byte(r.Replace(base + doc)))
}

func TestSitesAccepted(t *testing.T) {
	cfg, err := parseSites(t, threeSites)
	if err != nil {
		t.Fatalf("a good three-site config: %v", err)
	}
	if !cfg.HasSites() {
		t.Fatal("HasSites = false")
	}

	// The default site first, listed or not, then the config's order;
	// max_connections resolved against the effective backend limit.
	var got []string
	for _, s := range cfg.SiteList(40) {
		got = append(got, fmt.Sprintf("%s:%d", s.Name, s.MaxConnections))
	}
	if want := []string{"default:8", "shop:12", "wiki:20", "blogs:20"}; !slices.Equal(got, want) {
		t.Errorf("SiteList(40) = %v, want %v", got, want)
	}
	if l := cfg.SiteList(1); l[2].MaxConnections != 1 {
		t.Errorf("SiteList(1): wiki may hold %d connections, want 1 (at least one)", l[2].MaxConnections)
	}
	if l := cfg.SiteList(0); l[2].MaxConnections != 0 || l[1].MaxConnections != 12 {
		t.Errorf("SiteList(0) (limit unknown) = %+v, want the sites' own values", l)
	}

	// The site's own values over the server's.
	shop := cfg.SiteOptions(cfg.SiteList(0)[1])
	if !slices.Equal(shop.NeverCache, []string{"^/cart", "^/checkout"}) || shop.HeavyMinTTL != timefmt.Duration(5*time.Minute) {
		t.Errorf("the shop's options: never_cache %v, heavy_min_ttl %s", shop.NeverCache, shop.HeavyMinTTL)
	}
	if !slices.Equal(shop.SessionCookies, cfg.Profiles.SessionCookies) || shop.StaticTTL != cfg.Profiles.StaticTTL {
		t.Error("the shop's options lost the server's values of the keys it does not set")
	}

	// default and blogs share the server's profiles: three sets.
	sets := cfg.OverrideSets()
	var names [][]string
	for _, s := range sets {
		names = append(names, s.Sites)
	}
	if fmt.Sprint(names) != "[[default blogs] [shop] [wiki]]" {
		t.Errorf("OverrideSets = %v, want [[default blogs] [shop] [wiki]]", names)
	}
	if steady, reload := cfg.LoadedVCLs(); steady != 10 || reload != 20 {
		t.Errorf("LoadedVCLs = %d, %d; want 3 sets of 3 and the router, 10, and 20 during a reload", steady, reload)
	}
	if !cfg.Guests() {
		t.Error("Guests = false with the server's guest_pages auto")
	}
}

// Sites whose blocks come to the same options share their profiles, and
// a block that writes the server's own value adds no set.
func TestOverrideSetsCompareTheAppliedOptions(t *testing.T) {
	cfg, err := parseSites(t, `sites:
  - { name: a, hosts: [a.example], profiles: { never_cache: ['^/x'] } }
  - { name: b, hosts: [b.example], profiles: { never_cache: ['^/x'] } }
  - { name: c, hosts: [c.example], profiles: { heavy_min_ttl: 2m } }
  - { name: d, hosts: [d.example], profiles: { purge_acl: [] } }
  - { name: e, hosts: [e.example], profiles: { never_cache: null } }
`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range cfg.OverrideSets() {
		names = append(names, strings.Join(s.Sites, "+"))
	}
	if want := []string{"default+c+e", "a+b", "d"}; !slices.Equal(names, want) {
		t.Errorf("OverrideSets = %v, want %v", names, want)
	}

	none, _ := parseSites(t, "")
	if sets := none.OverrideSets(); len(sets) != 1 || !slices.Equal(sets[0].Sites, []string{DefaultSite}) {
		t.Errorf("without sites: OverrideSets = %+v, want the default site's alone", sets)
	}
	if steady, reload := none.LoadedVCLs(); steady != 3 || reload != 6 {
		t.Errorf("without sites: LoadedVCLs = %d, %d; want 0.4's 3 and 6", steady, reload)
	}
}

func TestSiteOf(t *testing.T) {
	cfg, err := parseSites(t, threeSites+`  - { name: deep, hosts: ['*.eu.blogs.example.net'] }
`)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"shop.example.com":           "shop",
		"Shop.Example.com:8443":      "shop",
		"www.shop.example.com":       "shop",
		"wiki.example.org":           "wiki",
		"a.blogs.example.net":        "blogs",
		"a.b.blogs.example.net":      "blogs", // one or more labels
		"blogs.example.net":          "blogs",
		"x.eu.blogs.example.net":     "deep", // the longer glob
		"eu.blogs.example.net":       "blogs",
		"example.net":                DefaultSite,
		"evilblogs.example.net":      DefaultSite,
		"shop.example.com.attack.io": DefaultSite,
		"":                           DefaultSite,
	} {
		if got := cfg.SiteOf(host); got != want {
			t.Errorf("SiteOf(%q) = %s, want %s", host, got, want)
		}
	}
}

func TestSitesRefused(t *testing.T) {
	const pools = "sensor: { phpfpm: { socket: /run/php/main.sock, pools: [ { name: www, socket: /run/php/www.sock }, { name: shop, socket: /run/php/shop.sock } ] } }\n"
	tests := []struct {
		name string
		doc  string
		want []string // each a problem line, in order
	}{
		{"duplicate names", "sites:\n  - { name: shop, hosts: [a.example] }\n  - { name: shop, hosts: [b.example] }\n", []string{
			"sites[1].name: site shop is already sites[0]: a name is one site's (line 4)"}},
		{"bad names", `sites:
  - { name: Shop, hosts: [a.example] }
  - { name: my_shop, hosts: [b.example] }
  - { name: a-name-of-thirty-three-characters, hosts: [c.example] }
  - { hosts: [d.example] }
`, []string{
			`sites[0].name: "Shop" is not a site name: 1 to 32 of a-z, 0-9 and - (line 3)`,
			`sites[1].name: "my_shop" is not a site name: 1 to 32 of a-z, 0-9 and - (line 4)`,
			`sites[2].name: "a-name-of-thirty-three-characters" is not a site name: 1 to 32 of a-z, 0-9 and - (line 5)`,
			"sites[3].name: must name the site: 1 to 32 of a-z, 0-9 and - (line 6)"}},
		{"default with hosts", "sites:\n  - name: default\n    hosts: [www.example.com]\n", []string{
			"sites[0].hosts: the default site serves every host no other site claims: drop its hosts, or give them a site of their own (line 4)"}},
		{"a site without hosts", "sites:\n  - name: shop\n  - { name: wiki, hosts: [] }\n", []string{
			"sites[0].hosts: site shop needs its host names (www.example.com) or globs (*.example.com) (line 3)",
			"sites[1].hosts: site wiki needs its host names (www.example.com) or globs (*.example.com) (line 4)"}},
		{"bad hosts", `sites:
  - name: shop
    hosts:
      - https://shop.example.com
      - shop.example.com/cart
      - shop.example.com:8080
      - shop_1.example.com
      - shop.example.com.
      - ''
      - -shop.example.com
      - '[::1]'
      - 'shop .example.com'
      - ` + strings.Repeat("a", 64) + `.example.com
      - shöp.example.com
`, []string{
			`sites[0].hosts[0]: "https://shop.example.com" has a scheme: give the host name alone (example.com, not https://example.com/) (line 5)`,
			`sites[0].hosts[1]: "shop.example.com/cart" has a path: give the host name alone (example.com, not example.com/shop) (line 6)`,
			`sites[0].hosts[2]: "shop.example.com:8080" has a port: give the host name alone, it is matched without the port (line 7)`,
			`sites[0].hosts[3]: "shop_1.example.com" is not a host name: letters, digits and - between dots (an international name in its xn-- form) (line 8)`,
			`sites[0].hosts[4]: "shop.example.com." ends in a dot: write it without (line 9)`,
			`sites[0].hosts[5]: an empty host: give a host name such as www.example.com (line 10)`,
			`sites[0].hosts[6]: "-shop.example.com" is not a host name: letters, digits and - between dots (an international name in its xn-- form) (line 11)`,
			`sites[0].hosts[7]: "[::1]" is not a host name: letters, digits and - between dots (an international name in its xn-- form) (line 12)`,
			`sites[0].hosts[8]: "shop .example.com" is not a host name: letters, digits and - between dots (an international name in its xn-- form) (line 13)`,
			`sites[0].hosts[9]: "` + strings.Repeat("a", 64) + `.example.com" is not a host name: letters, digits and - between dots (an international name in its xn-- form) (line 14)`,
			`sites[0].hosts[10]: "shöp.example.com" is not a host name: letters, digits and - between dots (an international name in its xn-- form) (line 15)`}},
		{"bad globs", "sites:\n  - name: blogs\n    hosts: ['a*.example.com', '*', 'foo.*.com', '*.*.com', '*example.com', '*.example.com']\n", []string{
			`sites[0].hosts[0]: "a*.example.com": a glob's * must be the whole leftmost label, as in *.example.com (line 4)`,
			`sites[0].hosts[1]: "*": a glob's * must be the whole leftmost label, as in *.example.com (line 4)`,
			`sites[0].hosts[2]: "foo.*.com": a glob's * must be the whole leftmost label, as in *.example.com (line 4)`,
			`sites[0].hosts[3]: "*.*.com": a glob's * must be the whole leftmost label, as in *.example.com (line 4)`,
			`sites[0].hosts[4]: "*example.com": a glob's * must be the whole leftmost label, as in *.example.com (line 4)`}},
		{"a host in two sites", `sites:
  - { name: shop, hosts: [shop.example.com, '*.shop.example.com'] }
  - name: wiki
    hosts: [wiki.example.com, Shop.Example.COM]
  - { name: blogs, hosts: ['*.SHOP.example.com'] }
`, []string{
			"sites[1].hosts[1]: Shop.Example.COM is already a host of site shop (sites[0].hosts[0]), not of wiki too: a host belongs to one site (line 5)",
			"sites[2].hosts[0]: *.SHOP.example.com is already a host of site shop (sites[0].hosts[1]), not of blogs too: a host belongs to one site (line 6)"}},
		{"a host twice in one site", "sites:\n  - { name: shop, hosts: [shop.example.com, SHOP.example.com] }\n", []string{
			"sites[0].hosts[1]: SHOP.example.com is already sites[0].hosts[0]: give it once (line 3)"}},
		{"a pool sensor.phpfpm does not read", pools + `sites:
  - { name: shop, hosts: [shop.example], phpfpm_pool: shop }
  - { name: wiki, hosts: [wiki.example], phpfpm_pool: wiki }
  - { name: blog, hosts: [blog.example], phpfpm_pool: shop }
`, []string{
			"sites[1].phpfpm_pool: sensor.phpfpm reads no pool named wiki (it reads www, shop): add it to sensor.phpfpm.pools with its name (line 5)",
			"sites[2].phpfpm_pool: pool shop is already site shop's (sites[0].phpfpm_pool): a pool's signals move one site (line 6)"}},
		{"a pool without sensor.phpfpm", "sites:\n  - { name: shop, hosts: [shop.example], phpfpm_pool: www }\n", []string{
			"sites[0].phpfpm_pool: sensor.phpfpm reads no pool named www: add it to sensor.phpfpm.pools with its name (line 3)"}},
		{"max_connections", "backend: { max_connections: 30 }\nsites:\n  - { name: shop, hosts: [shop.example], max_connections: -1 }\n  - { name: wiki, hosts: [wiki.example], max_connections: 31 }\n", []string{
			"sites[0].max_connections: must be 0 (half of the effective backend.max_connections) or a number of connections, got -1 (line 4)",
			"sites[1].max_connections: 31 is more than backend.max_connections (30): a site holds at most the backend's connections (line 5)"}},
		{"an unreadable purge_token_file", "sites:\n  - { name: shop, hosts: [shop.example], purge_token_file: '{{dir}}/absent' }\n", []string{
			"sites[0].purge_token_file: cannot read {{dir}}/absent: no such file or directory (line 3)"}},
		{"profiles overrides", `sites:
  - name: shop
    hosts: [shop.example]
    profiles:
      never_cache: ['^/cart', '', '(unclosed']
      session_cookies: ['[0-9a-f']
      purge_acl: [127.0.0.1, everyone]
      drop_query_params: ['utm_*', 'a b']
      guest_pages: sometimes
      heavy_min_ttl: 0s
  - { name: wiki, hosts: [wiki.example], profiles: { heavy_min_ttl: -1m } }
`, []string{
			"sites[0].profiles.heavy_min_ttl: must be positive, got 0s (line 11)",
			"sites[0].profiles.session_cookies[0]: {{set}} (line 7)",
			"sites[0].profiles.drop_query_params[1]: " + queryGlobErr("a b") + " (line 9)",
			"sites[0].profiles.never_cache[1]: an empty pattern would match every path (line 6)",
			`sites[0].profiles.never_cache[2]: "(unclosed" is not a valid regex: missing closing ): ` + "`(unclosed`" + ` (line 6)`,
			`sites[0].profiles.purge_acl[1]: "everyone" is not an IP address or CIDR (e.g. 10.0.0.0/8) (line 8)`,
			`sites[0].profiles.guest_pages: must be auto or off, got "sometimes" (line 10)`,
			"sites[1].profiles.heavy_min_ttl: must be positive, got -1m (line 12)"}},
		{"a site's value that needs a server key", "profiles: { guest_pages: 'off', guest_listen: nowhere }\nsites:\n  - name: shop\n    hosts: [shop.example]\n    profiles: { guest_pages: auto }\n", []string{
			`sites[0].profiles: with this site's values, profiles.guest_listen: "nowhere" is not an IP address and port (e.g. 127.0.0.1:6089) (line 6)`}},
		{"the server's problem is the server's", "profiles: { never_cache: [''] }\nsites:\n  - { name: shop, hosts: [shop.example], profiles: { never_cache: [''] } }\n  - { name: wiki, hosts: [wiki.example], profiles: { heavy_min_ttl: 1m } }\n", []string{
			"profiles.never_cache[0]: an empty pattern would match every path (line 2)",
			"sites[0].profiles.never_cache[0]: an empty pattern would match every path (line 4)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := fixture(t)
			_, err := Parse([]byte(r.Replace(base + tc.doc)))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error = %v, want an *Error", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			_, globErr := profiles.CookieGlobRegex("[0-9a-f")
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = strings.ReplaceAll(r.Replace(w), "{{set}}", fmt.Sprint(globErr))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func queryGlobErr(s string) string {
	_, err := profiles.QueryGlobRegex(s)
	return fmt.Sprint(err)
}

// A hostile file cannot make the daemon route (render, compile) for ever.
func TestSitesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("sites:\n")
	for i := range MaxSites + 1 {
		fmt.Fprintf(&b, "  - { name: s%d, hosts: [s%d.example] }\n", i, i)
	}
	_, err := parseSites(t, b.String())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("sites: %d sites, more than the %d one gearshift routes", MaxSites+1, MaxSites)) {
		t.Errorf("%d sites: %v", MaxSites+1, err)
	}

	hosts := make([]string, MaxSiteHosts+1)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example", i)
	}
	_, err = parseSites(t, "sites: [ { name: many, hosts: ["+strings.Join(hosts, ", ")+"] } ]\n")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("sites: %d host names and globs, more than the %d", MaxSiteHosts+1, MaxSiteHosts)) {
		t.Errorf("%d hosts: %v", MaxSiteHosts+1, err)
	}
}

// A site's purge token file is judged as the server's is: one every user
// may read is a warning.
func TestSitePurgeTokenWarns(t *testing.T) {
	cfg, err := parseSites(t, threeSites)
	if err != nil {
		t.Fatal(err)
	}
	if ws := cfg.Warnings(); len(ws) != 0 {
		t.Fatalf("warnings of a good config: %v", ws)
	}
	token := cfg.Sites[0].PurgeTokenFile
	os.Chmod(token, 0o644)
	ws := cfg.Warnings()
	if len(ws) != 1 || !strings.HasPrefix(ws[0].String(), "sites[0].purge_token_file: "+token+" can be read by every user") {
		t.Errorf("a 0644 site token file: warnings %v", ws)
	}
}

// Sets of overrides cost three loaded VCLs each, twice during a reload:
// past Varnish's default max_vcl the config is warned about, not refused.
func TestMaxVCLWarning(t *testing.T) {
	doc := func(sets int) string {
		var b strings.Builder
		b.WriteString("sites:\n")
		for i := range sets {
			fmt.Fprintf(&b, "  - { name: s%d, hosts: [s%d.example], profiles: { heavy_min_ttl: %dm } }\n", i, i, 3+i)
		}
		return b.String()
	}
	// 15 sets and the default's: 48 profiles and the router, 98 during a
	// reload, 99 with Varnish's boot VCL.
	cfg, err := parseSites(t, doc(15))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.maxVCLWarning(); w != nil {
		t.Errorf("16 sets: %v", w)
	}
	cfg, err = parseSites(t, doc(16))
	if err != nil {
		t.Fatalf("17 sets are a warning, not a problem: %v", err)
	}
	ws := cfg.Warnings()
	want := "sites: 17 distinct sets of site profiles overrides load 52 VCLs, and a reload briefly 104 beside Varnish's own: more than varnishd's default max_vcl (100)"
	if len(ws) != 1 || !strings.HasPrefix(ws[0].String(), want) || !strings.Contains(ws[0].String(), "-p max_vcl=105") {
		t.Errorf("warnings = %v, want one beginning %q", ws, want)
	}
	// Label mode loads no router.
	cfg.Varnish.Mode = ModeLabel
	if steady, _ := cfg.LoadedVCLs(); steady != 51 {
		t.Errorf("label mode: %d loaded VCLs, want 51", steady)
	}
}

// A site's own guest_pages starts the daemon's guest listener.
func TestGuestsOfASite(t *testing.T) {
	cfg, err := parseSites(t, "profiles: { guest_pages: 'off' }\nsites: [ { name: shop, hosts: [shop.example], profiles: { guest_pages: auto } } ]\n")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Guests() {
		t.Error("Guests = false with the shop's guest_pages auto")
	}
	off, _ := parseSites(t, "profiles: { guest_pages: 'off' }\n")
	if off.Guests() {
		t.Error("Guests = true with guest_pages off")
	}
	if keys := RestartKeys(off, cfg); !slices.Equal(keys, []string{"profiles.guest_listen"}) {
		t.Errorf("RestartKeys when a site turns guest pages on = %v", keys)
	}
}

// The example of docs/sites.md is a good config, with the sites and sets
// the page says it has.
func TestSitesDocExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "sites.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "## The sites key\n\n```yaml\n")
	example, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("docs/sites.md has no yaml example under \"The sites key\"")
	}
	r := fixture(t)
	cfg, err := ParseSettings([]byte(r.Replace(base) + example))
	if err != nil {
		t.Fatalf("the example of docs/sites.md: %v", err)
	}
	var got []string
	for _, s := range cfg.SiteList(60) {
		got = append(got, fmt.Sprintf("%s:%d", s.Name, s.MaxConnections))
	}
	if want := []string{"default:10", "shop:20", "wiki:30", "blogs:30"}; !slices.Equal(got, want) {
		t.Errorf("the example's sites = %v, want %v", got, want)
	}
	if n := len(cfg.OverrideSets()); n != 3 {
		t.Errorf("the example has %d sets of overrides, want 3", n)
	}
}

// A site's pool is read apart from the server's from the start: the
// sensor is told which pools are the sites', and a reload that gives a
// pool to a site, or takes it back, needs a restart.
func TestSitePoolsToTheSensor(t *testing.T) {
	cfg := Default()
	cfg.Sensor.PHPFPM.Pools = []sensor.PHPFPMPool{{Name: "www", Socket: "/run/php/www.sock"}, {Name: "shop", Socket: "/run/php/shop.sock"}}
	if got := cfg.SensorConfig().SitePools; got != nil {
		t.Errorf("SitePools without sites = %v, want none", got)
	}
	next := *cfg
	next.Sites = []Site{{Name: "shop", Hosts: []string{"shop.example"}, PHPFPMPool: "shop"}, {Name: "blog", Hosts: []string{"blog.example"}}}
	if got := next.SensorConfig().SitePools; !maps.Equal(got, map[string]string{"shop": "shop"}) {
		t.Errorf("SitePools = %v, want shop's pool to shop", got)
	}
	if got := RestartKeys(cfg, &next); !slices.Equal(got, []string{"sites[].phpfpm_pool"}) {
		t.Errorf("a pool given to a site: RestartKeys = %v, want [sites[].phpfpm_pool]", got)
	}
	same := next
	same.Sites = append([]Site{{Name: "wiki", Hosts: []string{"wiki.example"}}}, next.Sites...)
	if got := RestartKeys(&next, &same); len(got) != 0 {
		t.Errorf("a site added without a pool: RestartKeys = %v, want none", got)
	}
}

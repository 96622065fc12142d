package profiles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/gearshift/gearshift/vcl"
)

// SiteLabelPrefix starts the VCL label of every site: gearshift-site-NAME
// points at the profile of the site's gear.
const SiteLabelPrefix = NamePrefix + "site-"

// RouterPrefix starts the name of the router, the active VCL when the
// config has sites: gearshift-router-<first 8 hex of sha256(VCL)>.
const RouterPrefix = NamePrefix + "router-"

// DefaultSite is the site of every host no other site claims.
const DefaultSite = "default"

// FetchLog starts the VCL_Log record of every backend request when the
// config has sites, followed by the request's site: the daemon counts
// them for each site's share of the backend.
const FetchLog = "gearshift-fetch: "

// SiteLabel returns the VCL label of the site named site.
func SiteLabel(site string) string { return SiteLabelPrefix + site }

// Route is one site as the router tells it: its name and the hosts it
// claims, lower-case names or globs whose "*" is the whole leftmost
// label (checked by the config).
type Route struct {
	Site  string
	Hosts []string
	// MaxConnections bounds the backend connections the site's requests
	// hold at once, over every loaded VCL (0: no bound of its own).
	MaxConnections int
	// PurgeTokenFile replaces profiles.purge_token_file for the site's
	// PURGE and BAN; "": the server's. Build reads it.
	PurgeTokenFile string
	token          string // its trimmed content
}

// vclSiteLimits is backend.max_connections as a vsthrottle bucket that
// every loaded VCL shares: Backend connections, a token back every
// flightToken on its own (Flow for them all).
type vclSiteLimits struct {
	Backend int
	Flow    string
	// Anon is what anonymous visitors' fetches may hold of Backend:
	// backend.max_connections less backend.session_reserve, a bucket of
	// its own refilled over AnonFlow; 0: no reserve.
	Anon     int
	AnonFlow string
}

// sites fills in what the templates need of the config's sites: the
// chain that tells a request's site, what each site's PURGE reaches and
// its token, and the backend's limits over every VCL (with
// varnish-modules). Without sites it does nothing.
func (d *vclData) sites(site Site) error {
	if len(site.Routes) == 0 {
		return nil
	}
	chain, err := chainOf(site.Routes)
	if err != nil {
		return err
	}
	d.Sites = &chain
	d.SiteScopes = siteScopes(site.Routes, site.Options.NormalizeHost)
	var own []string
	for _, s := range d.SiteScopes {
		if s.Token != "" {
			own = append(own, `req.http.X-Gs-Site != "`+s.Site+`"`)
		}
	}
	d.ServerTokenSites = strings.Join(own, " && ")
	if d.Modules && d.MaxConnections > 0 {
		d.SiteLimits = &vclSiteLimits{Backend: d.MaxConnections, Flow: vclDuration(time.Duration(d.MaxConnections) * flightToken)}
		if d.SessionReserve > 0 {
			d.SiteLimits.Anon = d.MaxConnections - d.SessionReserve
			d.SiteLimits.AnonFlow = vclDuration(time.Duration(d.SiteLimits.Anon) * flightToken)
		}
	}
	return nil
}

// vclSiteScope is what a PURGE or BAN sent to one site may reach: a ban
// condition over the stored host (every host of the site, and no other
// site's), and the site's own purge token (a VCL string; "": the
// server's).
type vclSiteScope struct {
	Site  string
	Scope string
	Token string
}

// siteScopes returns the purge scope of each site of routes, the stored
// host as the profiles store it (X-Gs-Host: lower case, no port and no
// "www." with normalize_host, else the Host as sent).
func siteScopes(routes []Route, normalize bool) []vclSiteScope {
	pattern := func(hosts []string) string {
		var alts []string
		for _, h := range hosts {
			h = strings.ToLower(h)
			glob := strings.HasPrefix(h, "*.")
			h = strings.TrimPrefix(h, "*.")
			if normalize && !glob {
				h = strings.TrimPrefix(h, "www.")
			}
			// Ban arguments are bare words: a dot is [.], not \. (host
			// names hold nothing else a regex reads).
			p := strings.ReplaceAll(h, ".", "[.]")
			if glob {
				p = "[^.]+([.][^.]+)*[.]" + p
			}
			alts = append(alts, p)
		}
		port := "(:[0-9]+)?"
		if normalize {
			port = ""
		}
		return "(?i)^(" + strings.Join(alts, "|") + ")" + port + "$"
	}
	var others []string
	for _, r := range routes {
		if r.Site != DefaultSite {
			others = append(others, r.Hosts...)
		}
	}
	var scopes []vclSiteScope
	for _, r := range routes {
		s := vclSiteScope{Site: r.Site}
		if r.Site == DefaultSite {
			s.Scope = "obj.http.X-Gs-Host !~ " + pattern(others)
		} else {
			s.Scope = "obj.http.X-Gs-Host ~ " + pattern(r.Hosts)
		}
		if r.token != "" {
			s.Token = `{"` + r.token + `"}`
		}
		scopes = append(scopes, s)
	}
	return scopes
}

// routeCase is one `if` of a site chain: a condition over X-Gs-Route
// and the site it names.
type routeCase struct {
	Cond  string
	Site  string
	Limit int    // the site's max_connections (0: none of its own)
	Flow  string // how long its bucket takes to refill: Limit tokens of flightToken
	// Copies is what refreshes of stored copies may hold of Limit: a
	// quarter (rounded down) is kept for pages with no copy to fall back
	// on; 0: Limit under 4, no such bucket. CopiesFlow refills it.
	Copies     int
	CopiesFlow string
	depth      int // labels of a glob's suffix: the narrower glob first
}

// Label is the case's site label, for the router.
func (c routeCase) Label() string { return SiteLabel(c.Site) }

// siteChain is how the router, and each profile, tell a request's site
// from X-Gs-Route: every exact name before any glob, a narrower glob
// before a wider one, DefaultSite when none matches.
type siteChain struct {
	Sites        int
	Exact, Globs []routeCase
	Default      routeCase // the default site's own limit
}

// chainOf returns the chain of routes. routes must be checked (the
// config's validation does); DefaultSite needs no entry, and one with
// hosts is refused.
func chainOf(routes []Route) (siteChain, error) {
	chain := siteChain{Sites: 1, Default: routeCase{Site: DefaultSite}}
	for _, r := range routes {
		if r.Site == DefaultSite {
			if len(r.Hosts) > 0 {
				return chain, fmt.Errorf("site %s claims no hosts: it has every host no other site claims", DefaultSite)
			}
			chain.Default = limited(chain.Default, r.MaxConnections)
			continue
		}
		if !siteName.MatchString(r.Site) {
			return chain, fmt.Errorf("site name %q: want 1 to 32 of a-z, 0-9 and -", r.Site)
		}
		chain.Sites++
		var exact []string
		for _, h := range r.Hosts {
			h = strings.ToLower(h)
			if !hostPattern.MatchString(h) {
				return chain, fmt.Errorf("site %s: host %q: want a host name, or *. and a host name", r.Site, h)
			}
			if suffix, ok := strings.CutPrefix(h, "*."); ok {
				chain.Globs = append(chain.Globs, limited(routeCase{
					Cond:  `req.http.X-Gs-Route ~ "^[^.]+(\.[^.]+)*\.` + regexp.QuoteMeta(suffix) + `$"`,
					Site:  r.Site,
					depth: strings.Count(suffix, ".") + 1,
				}, r.MaxConnections))
				continue
			}
			exact = append(exact, `req.http.X-Gs-Route == "`+h+`"`)
		}
		if len(exact) > 0 {
			chain.Exact = append(chain.Exact, limited(routeCase{Cond: strings.Join(exact, " ||\n        "), Site: r.Site}, r.MaxConnections))
		}
	}
	slices.SortStableFunc(chain.Globs, func(a, b routeCase) int { return b.depth - a.depth })
	return chain, nil
}

// limited gives c the limit n (0: none).
func limited(c routeCase, n int) routeCase {
	if n > 0 {
		c.Limit, c.Flow = n, vclDuration(time.Duration(n)*flightToken)
	}
	if spare := n / 4; spare > 0 {
		c.Copies = n - spare
		c.CopiesFlow = vclDuration(time.Duration(c.Copies) * flightToken)
	}
	return c
}

// Router returns the router program for routes: each request to the label
// of the site that claims its Host (see siteChain). Its Gear means
// nothing.
func Router(routes []Route) (Profile, error) {
	chain, err := chainOf(routes)
	if err != nil {
		return Profile{}, fmt.Errorf("router: %w", err)
	}
	text, err := renderRouter(chain, "")
	if err != nil {
		return Profile{}, err
	}
	sum := sha256.Sum256([]byte(text))
	return Profile{Name: RouterPrefix + hex.EncodeToString(sum[:4]), VCL: text, Source: SourceBuiltin}, nil
}

// SitesSnippet returns the VCL that, in label mode, hands each request to
// its site's label (sub gearshift_recv), for a site's own VCL to include
// from path, as the router does in active mode.
func SitesSnippet(routes []Route, path string) (string, error) {
	chain, err := chainOf(routes)
	if err != nil {
		return "", fmt.Errorf("sites snippet: %w", err)
	}
	return renderRouter(chain, path)
}

// routerChunk is how many of the chain's conditions one sub of the
// router holds: 300 sites (600 conditions) compile in 2 s in 30 subs of
// 20, 5 s in one vcl_recv.
const routerChunk = 20

// renderRouter renders router.vcl for chain: the router, or with a
// snippet path the label mode's snippet.
func renderRouter(chain siteChain, snippet string) (string, error) {
	data := struct {
		siteChain
		Default, Snippet string
		Chunks           [][]routeCase
	}{chain, SiteLabel(DefaultSite), snippet, slices.Collect(slices.Chunk(slices.Concat(chain.Exact, chain.Globs), routerChunk))}
	t, err := template.New("router").Option("missingkey=error").ParseFS(vcl.FS, "router.vcl", "site.vcl")
	if err != nil {
		return "", fmt.Errorf("render router: %w", err)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "router.vcl", data); err != nil {
		return "", fmt.Errorf("render router: %w", err)
	}
	return buf.String(), nil
}

var (
	siteName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	// hostPattern is a host name of lower-case labels, optionally behind
	// "*." (a glob); the config's validation says more when it fails.
	hostPattern = regexp.MustCompile(`^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$`)
)

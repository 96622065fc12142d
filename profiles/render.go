package profiles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/vcl"
)

// NamePrefix starts the name of every VCL gearshift loads; VCLs without it
// are not gearshift's and are never touched.
const NamePrefix = "gearshift-"

// SourceBuiltin is Profile.Source for a VCL rendered from gearshift's templates.
const SourceBuiltin = "built-in"

// Profile is one gear's VCL program, ready for vcl.inline.
type Profile struct {
	Gear   state.Gear
	Name   string // "gearshift-<state>-<first 8 hex of sha256(VCL)>"
	VCL    string // the full program text
	Source string // SourceBuiltin or the vcl_file path
	// plainVCL is the text for a Varnish without varnish-modules (see
	// Site.NoModules); "" for a vcl_file, used as it is everywhere.
	plainVCL string
	token    string // the purge token the text holds, for Redact
	// guestSecret is the guest secret the text holds, for Redact.
	guestSecret string
	siteTokens  string // the sites' own purge tokens, a line each (a Set stays comparable)
}

// Plain returns the profile for a Varnish without varnish-modules, and
// whether it differs from p.
func (p Profile) Plain() (Profile, bool) {
	if p.plainVCL == "" || p.plainVCL == p.VCL {
		return p, false
	}
	plain := p
	plain.VCL, plain.Name, plain.plainVCL = p.plainVCL, Name(p.Gear, p.plainVCL), ""
	return plain, true
}

// Set is a profile for each gear, indexed by state.Gear.
type Set [len(state.All)]Profile

// Plain returns the profiles to load into a Varnish without
// varnish-modules.
func (set *Set) Plain() *Set {
	var plain Set
	for i, p := range set {
		plain[i], _ = p.Plain()
	}
	return &plain
}

// Build renders each gear's profile, or reads its vcl_file verbatim when one
// is configured, with its Plain twin. It reads profiles.purge_token_file.
// site must be checked (the config's validation does): the rendering
// trusts it. Errors name the config key at fault.
func Build(site Site) (Set, error) {
	if f := site.Options.PurgeTokenFile; f != "" && site.PurgeToken == "" {
		token, err := ReadPurgeToken(f)
		if err != nil {
			return Set{}, fmt.Errorf("profiles.purge_token_file: %w", err)
		}
		site.PurgeToken = token
	}
	site.Routes = slices.Clone(site.Routes)
	var siteTokens []string
	for i, r := range site.Routes {
		if r.PurgeTokenFile == "" || r.token != "" {
			continue
		}
		token, err := ReadPurgeToken(r.PurgeTokenFile)
		if err != nil {
			return Set{}, fmt.Errorf("sites[%s].purge_token_file: %w", r.Site, err)
		}
		site.Routes[i].token = token
		siteTokens = append(siteTokens, token)
	}
	var set Set
	for _, s := range state.All {
		p := Profile{Gear: s, Source: SourceBuiltin}
		if file := site.Options.Sources()[s].VCLFile; file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return Set{}, fmt.Errorf("profiles.%s.vcl_file: %w", s, err)
			}
			// Validate says so too; this also covers a config used
			// without it, so Varnish never compiles (and quotes) a
			// file that is no VCL.
			if err := site.CheckVCLFile(file, b); err != nil {
				return Set{}, fmt.Errorf("profiles.%s.vcl_file: %w", s, err)
			}
			p.VCL, p.Source = string(b), file
		} else {
			text, err := Render(site, s)
			if err != nil {
				return Set{}, err
			}
			p.VCL = text
			plainSite := site
			plainSite.NoModules = true
			if p.plainVCL, err = Render(plainSite, s); err != nil {
				return Set{}, err
			}
		}
		p.Name = Name(s, p.VCL)
		p.token, p.guestSecret, p.siteTokens = site.PurgeToken, site.GuestSecret, strings.Join(siteTokens, "\n")
		set[s] = p
	}
	return set, nil
}

// Name returns the content-addressed name of a gear's VCL: the same text
// always gets the same name, a changed text a new one.
func Name(s state.Gear, vcl string) string {
	sum := sha256.Sum256([]byte(vcl))
	return NamePrefix + s.String() + "-" + hex.EncodeToString(sum[:4])
}

// Render returns the built-in VCL of gear s filled in with site's values.
// It ignores vcl_file; see Build. site must be checked.
func Render(site Site, s state.Gear) (string, error) {
	if !s.Valid() {
		return "", fmt.Errorf("render profile: unknown state %d", int(s))
	}
	d, err := newVCLData(site, s)
	if err != nil {
		return "", err
	}
	t, err := template.New(s.String()).Option("missingkey=error").Funcs(d.funcs()).ParseFS(vcl.FS, vcl.Common, "site.vcl", s.String()+".vcl")
	if err != nil {
		return "", fmt.Errorf("render profile %s: %w", s, err)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, s.String()+".vcl", d); err != nil {
		return "", fmt.Errorf("render profile %s: %w", s, err)
	}
	return buf.String(), nil
}

// summaries fails to compile when a gear is added to state.All without one.
var summaries [len(state.All)]string = [...]string{
	state.Light:    "static objects cached, everything else passed",
	state.Moderate: "static objects and what the backend marks cacheable; session requests passed",
	state.Heavy:    "everything cacheable: anonymous pages shared, session pages per session, stale served in grace",
}

// vclData is what the templates see. Every string is already valid VCL.
type vclData struct {
	State       string
	Summary     string
	BackendHost string
	BackendPort int

	StaticTTL, HeavyMinTTL, HeavySessionTTL, HeavyGrace string
	ModerateHeuristicTTL                                string // "" when off

	NormalizeHost bool
	ExposeHeaders bool

	SessionRE   string   // a group matching any session cookie name; "": every cookie not ignored
	IgnoreRE    string   // a group matching any ignored cookie name; "" for none
	StripRE     string   // a group matching a cookie heavy may strip from a shared response; "" for none
	StripOptIn  bool     // strip_set_cookies is set: a response stripped of them may be stored despite no-store
	StaticRE    string   // matches a URL whose path has a static extension; "" for none
	NeverCache  []string // regexes over the normalised path and query (X-Gs-Path)
	PurgeACL    []string // ACL entries: "addr" or "addr"/bits
	PassHeaders []string // header names; a request with any of them is passed

	DropRE       string // a group matching a query parameter name to drop; "" for none
	SortQuery    bool   // sort the query's parameters
	KeepWarm     bool   // light and moderate store what heavy would, for heavy alone
	StaleIfError string // the oldest copy served when the backend fails; "" for never
	CopyGrace    string // grace of an anonymous copy: the longer of heavy_grace and stale_if_error

	TrustedProxies []string // ACL entries of trusted_proxies
	WebsocketPaths []string // regex-quoted path prefixes piped as websockets

	FirstByteTimeout string
	MaxConnections   int       // backend.max_connections
	CopyConnections  int       // what anonymous fetches may take: max_connections less the session reserve (three quarters without one)
	SpareConnections int       // of CopyConnections, what refreshes of stored copies may not take: a never-fetched page's second try (gearshift_spare); 0: none
	CopyLimit        int       // gearshift_copies' .max_connections: CopyConnections less SpareConnections
	SessionReserve   int       // backend.session_reserve's connections; 0: off
	Probe            *vclProbe // nil: no probe
	Guest            *vclGuest // heavy with guest_pages auto; nil otherwise
	GuestTimeout     string    // how long the daemon may take: its two fetches
	GuestNoLog       string    // GuestNoLog

	Modules    bool       // varnish-modules' xkey and vsthrottle are imported
	Budget     *vclBudget // moderate and heavy with modules and a client_budget; nil otherwise
	PurgeToken string     // the purge token as a VCL string; "" for none
	SoftPurge  bool       // a PURGE marks the anonymous copies stale (profiles.soft_purge)
	XkeyTags   bool       // a PURGE of tags goes through xkey (varnish-modules, no sites)
	TagRE      string     // a regex matching a list of tags (an xkey header)
	Hops       []int      // one per proxy gearshift_client looks through
	// StatusPaths are the PHP-FPM status paths of Site.StatusPaths.
	StatusPaths []string
	Doors       doorWords // the front door's log record and words
	// ExpandSteps: one per "::" expansion gearshift_client may need to
	// write an IPv6 address out in full (six, for "::").
	ExpandSteps []int

	GuestSecretHeader string // the header of the daemon's answers that carries Guest.Secret

	Sites      *siteChain     // the config's sites; nil without a sites key
	SiteLimits *vclSiteLimits // with sites and varnish-modules: the backend's limits over every VCL
	SiteScopes []vclSiteScope // with sites: what each site's PURGE and BAN reach, and their tokens
	// ServerTokenSites is a condition true for the requests of the sites
	// without a purge token of their own; "" when none has one.
	ServerTokenSites string
	DefaultSite      string
	FetchLog         string // FetchLog, as the templates see it
}

// vclBudget is profiles.client_budget as vsthrottle's arguments: Limit
// requests per Period is a bucket of Limit refilled at the rate.
type vclBudget struct {
	Limit  int
	Period string // a VCL duration
	Retry  string // Retry-After, in seconds: the time one request's token takes
	// InFlight is how many of a client's requests may be at the backend
	// at once: half of backend.max_connections. The tokens come back
	// with the answers; the bucket also refills on its own, by one token
	// every flightToken, so that a token lost on the way (a cache child
	// that died mid-fetch) comes back in the end.
	InFlight     int
	FlightPeriod string
}

// flightToken is how long the bucket of a client's requests in flight
// takes to grow by one token on its own: over two minutes, so that a
// client whose requests are slow (PHP's session lock) holds no more than
// InFlight after its first minute, however long it holds them.
const flightToken = 2 * time.Minute

// vclGuest is profiles.guest_listen, where heavy asks the daemon for
// guest pages.
type vclGuest struct {
	Host   string
	Port   int
	Secret string // Site.GuestSecret as a VCL string
}

// vclProbe is backend.probe, as VCL values.
type vclProbe struct {
	URL, Host         string // Host: the backend's address as a Host header
	Interval, Timeout string
	Window, Threshold int
}

// funcs are the templates' helpers that write a VCL expression or
// statements over the header they are given.
func (d *vclData) funcs() template.FuncMap {
	return template.FuncMap{
		// hostKey: a Host as the cache key holds it, lower case, without
		// the port and without "www.".
		// banHost: the ban condition over the stored host of a PURGE or
		// BAN: its Host's, or with sites every host of its site.
		"banHost": func() string {
			if d.SiteScopes != nil {
				return `req.http.X-Gs-Scope`
			}
			return `"obj.http.X-Gs-Host == " + req.http.X-Gs-Host`
		},
		"hostKey": func(h string) string {
			return `regsub(std.tolower(regsub(` + h + `, ":[0-9]+$", "")), "^www\.", "")`
		},
		// sessionKey: statements setting dst to the session cookies of
		// the cookies src (gearshift_recv's canonical X-Gs-Cookie, or a
		// fetch's Cookie made from it), name=value; in the client's order.
		// Without session_cookies, every cookie left is one.
		"sessionKey": func(dst, src string) string {
			if d.SessionRE == "" {
				return `set ` + dst + ` = ` + src + `;`
			}
			lines := []string{
				`set ` + dst + ` = regsuball(";" + ` + src + `, "[\s;]*;[\s;]*", ";");`,
				`set ` + dst + ` = regsuball(` + dst + `, {";(` + d.SessionRE + `=)"}, "; \1");`,
				`set ` + dst + ` = regsuball(` + dst + `, ";[^ ;][^;]*", "");`,
				`set ` + dst + ` = regsuball(` + dst + `, "^[; ]+|[; ]+$", "");`,
			}
			return strings.Join(lines, "\n        ")
		},
		// keyURL: statements setting dst to the URL src as the cache
		// key holds it (Options.CacheURL does the same): the query
		// sorted when sort_query is on, unless a name repeats or holds
		// an array's brackets, where the order is the meaning.
		"keyURL": func(dst, src, indent string) string {
			if !d.SortQuery {
				return `set ` + dst + ` = ` + src + `;`
			}
			return strings.Join([]string{
				`if (` + src + ` ~ {"` + unsortableQueryRE + `"}) {`,
				`    set ` + dst + ` = ` + src + `;`,
				`} else {`,
				`    set ` + dst + ` = regsub(std.querysort(` + src + `), "\?$", "");`,
				`}`,
			}, "\n"+indent)
		},
		// statusPath: a condition on req.url that holds for Apache's
		// server-status and server-info pages, however the path is
		// written.
		"statusPath": func() string {
			cond := statusPathCondition
			for _, p := range d.StatusPaths {
				cond += " ||\n        " + fpmStatusCondition(p)
			}
			return cond
		},
		// reason: a reason word of Reasons as a VCL string.
		"reason": reasonLiteral,
		// logReason: the statement writing the VCL_Log record of a
		// fetch's reason, from the string expression word.
		"logReason": func(word string) string {
			return `std.log("` + ReasonLog + `" + ` + word + `);`
		},
		// cookieName: the name of the first cookie of a Cookie or
		// Set-Cookie value h (several Set-Cookie headers may be joined
		// by newlines), as a reason's detail field.
		"cookieName": func(h string) string {
			return `"` + ReasonCookie + `" + regsub(` + h + `, {"(?s)^\s*([^=;\s]*).*$"}, "\1")`
		},
		// sessionTag: a session key as one bare word a ban can match:
		// other characters become "_" (two sessions may then share a
		// tag, and one's write drop the other's pages; never serve them).
		"sessionTag": func(h string) string {
			return `regsuball(` + h + `, "[^A-Za-z0-9_.=%-]", "_")`
		},
	}
}

func newVCLData(site Site, s state.Gear) (*vclData, error) {
	p := &site.Options
	d := &vclData{
		State:         s.String(),
		Summary:       summaries[s],
		BackendHost:   site.Backend.Host,
		BackendPort:   site.Backend.Port,
		NormalizeHost: p.NormalizeHost,
		ExposeHeaders: p.ExposeHeaders,
		DefaultSite:   DefaultSite,
		FetchLog:      FetchLog,
	}
	// site is checked (Options.Check): the checks live there alone.
	d.StaticTTL = vclDuration(time.Duration(p.StaticTTL))
	d.HeavyMinTTL = vclDuration(time.Duration(p.HeavyMinTTL))
	d.HeavySessionTTL = vclDuration(time.Duration(p.HeavySessionTTL))
	d.HeavyGrace = vclDuration(time.Duration(p.HeavyGrace))
	d.ModerateHeuristicTTL = vclDuration(time.Duration(p.ModerateHeuristicTTL))

	var err error
	if d.SessionRE, err = cookiesRE("session_cookies", p.SessionCookies); err != nil {
		return nil, err
	}
	if d.IgnoreRE, err = cookiesRE("ignore_cookies", p.IgnoreCookies); err != nil {
		return nil, err
	}
	if d.StripRE, err = cookiesRE("strip_set_cookies", append(append([]string{}, p.IgnoreCookies...), p.StripSetCookies...)); err != nil {
		return nil, err
	}
	d.StripOptIn = len(p.StripSetCookies) > 0

	var exts []string
	for _, e := range p.StaticExtensions {
		exts = append(exts, strings.ToLower(e))
	}
	if len(exts) > 0 {
		// The extension ends the path; a query string does not count.
		d.StaticRE = `(?i)^[^?#]*\.(?:` + strings.Join(exts, "|") + `)(?:[?#].*)?$`
	}

	d.NeverCache = append(d.NeverCache, p.NeverCache...)

	var params []string
	for i, g := range p.DropQueryParams {
		re, err := QueryGlobRegex(g)
		if err != nil {
			return nil, fmt.Errorf("profiles.drop_query_params[%d]: %w", i, err)
		}
		params = append(params, re)
	}
	if len(params) > 0 {
		d.DropRE = "(?:" + strings.Join(params, "|") + ")"
	}
	d.SortQuery = p.SortQuery
	d.KeepWarm = p.KeepWarm
	if p.StaleIfError > 0 {
		d.StaleIfError = vclDuration(time.Duration(p.StaleIfError))
	}
	d.CopyGrace = vclDuration(time.Duration(max(p.HeavyGrace, p.StaleIfError)))

	b := site.Backend
	d.FirstByteTimeout = vclDuration(time.Duration(b.FirstByteTimeout))
	d.MaxConnections = b.MaxConnections
	if d.MaxConnections == 0 {
		d.MaxConnections = FallbackMaxConnections
	}
	d.CopyConnections = max(1, d.MaxConnections*3/4)
	if r := b.ReserveFor(d.MaxConnections, len(site.Routes) > 0); r > 0 {
		d.SessionReserve = r
		d.CopyConnections = d.MaxConnections - r
		d.SpareConnections = d.CopyConnections / 4
	}
	d.CopyLimit = d.CopyConnections - d.SpareConnections
	if b.Probe.URL != "" {
		d.Probe = &vclProbe{
			URL:       b.Probe.URL,
			Host:      hostHeader(b.Host),
			Interval:  vclDuration(time.Duration(b.Probe.Interval)),
			Timeout:   vclDuration(time.Duration(b.Probe.Timeout)),
			Window:    b.Probe.Window,
			Threshold: b.Probe.Threshold,
		}
	}

	if s == state.Heaviest && p.Guests() && site.GuestSecret != "" {
		ap, err := netip.ParseAddrPort(p.GuestListen)
		if err != nil {
			return nil, fmt.Errorf("profiles.guest_listen: %w", err)
		}
		if !guestSecretRE.MatchString(site.GuestSecret) {
			return nil, errors.New("guest secret: letters and digits wanted")
		}
		d.Guest = &vclGuest{Host: ap.Addr().String(), Port: int(ap.Port()), Secret: `"` + site.GuestSecret + `"`}
		d.GuestSecretHeader = GuestSecretHeader
		d.GuestTimeout = vclDuration(2*time.Duration(b.FirstByteTimeout) + time.Second)
		d.GuestNoLog = GuestNoLog
	}

	d.Modules = !site.NoModules
	if b := p.ClientBudget; d.Modules && b.Rate > 0 && s != state.Lightest {
		d.Budget = &vclBudget{
			Limit:  b.Burst,
			Period: vclDuration((time.Duration(float64(b.Burst) / b.Rate * float64(time.Second))).Round(time.Millisecond)),
			Retry:  strconv.Itoa(int(math.Ceil(1 / b.Rate))),

			InFlight:     max(1, d.MaxConnections/2),
			FlightPeriod: vclDuration(time.Duration(max(1, d.MaxConnections/2)) * flightToken),
		}
		d.Hops = make([]int, maxProxyHops)
		d.ExpandSteps = make([]int, 6)
	}
	if err := d.sites(site); err != nil {
		return nil, fmt.Errorf("render profile %s: %w", s, err)
	}
	if site.PurgeToken != "" {
		d.PurgeToken = `{"` + site.PurgeToken + `"}`
	}
	d.TagRE = tagListRE
	d.SoftPurge = p.SoftPurges(s)
	d.XkeyTags = d.Modules && d.SiteScopes == nil
	d.StatusPaths = site.StatusPaths
	d.Doors = doorWords{Log: DoorLog, Direct: DoorDirect, ProxyProtocol: DoorProxyProtocol, Forwarded: DoorForwarded, Unidentified: DoorUnidentified}

	if d.ModerateHeuristicTTL == "0s" {
		d.ModerateHeuristicTTL = ""
	}
	// Authorization is always passed (docs/gears.md#what-is-never-shared-and-why): pass_headers adds
	// to it, it does not replace it.
	d.PassHeaders = []string{"Authorization"}
	for _, h := range p.PassHeaders {
		if !strings.EqualFold(h, "Authorization") {
			d.PassHeaders = append(d.PassHeaders, h)
		}
	}

	for i, a := range p.PurgeACL {
		entry, err := aclEntry(a)
		if err != nil {
			return nil, fmt.Errorf("profiles.purge_acl[%d]: %w", i, err)
		}
		d.PurgeACL = append(d.PurgeACL, entry)
	}
	for i, a := range p.TrustedProxies {
		entry, err := aclEntry(a)
		if err != nil {
			return nil, fmt.Errorf("profiles.trusted_proxies[%d]: %w", i, err)
		}
		d.TrustedProxies = append(d.TrustedProxies, entry)
	}
	for _, w := range p.WebsocketPaths {
		d.WebsocketPaths = append(d.WebsocketPaths, regexp.QuoteMeta(w))
	}
	return d, nil
}

// maxProxyHops is how many trusted proxies in a row gearshift_client
// looks through for the client (a CDN, a load balancer, a TLS terminator).
const maxProxyHops = 4

// tagListRE matches an xkey or Surrogate-Key header a PURGE may carry:
// tags of letters, digits and _.:=%/+-, separated by spaces or commas.
const tagListRE = `^[\s,]*[A-Za-z0-9_.:=%/+-]+(?:[\s,]+[A-Za-z0-9_.:=%/+-]+)*[\s,]*$`

// cookiesRE is a group matching exactly the cookie names of globs; "" for
// none. key names the config list in an error.
func cookiesRE(key string, globs []string) (string, error) {
	var names []string
	for i, g := range globs {
		re, err := CookieGlobRegex(g)
		if err != nil {
			return "", fmt.Errorf("profiles.%s[%d]: %w", key, i, err)
		}
		names = append(names, re)
	}
	if len(names) == 0 {
		return "", nil
	}
	return "(?:" + strings.Join(names, "|") + ")", nil
}

// statusPathCondition holds for a URL whose path has a segment naming
// Apache's mod_status or mod_info page, however Apache would normalise
// it: any letter percent-encoded, any slashes or dot-segments before it
// (so it holds at any depth: "/blog/server-status/" too, a page name no
// site needs; "/blog/server-status-explained" is not such a segment).
var statusPathCondition = func() string {
	var b strings.Builder
	for _, c := range "server-" {
		b.WriteString(encodedChar(byte(c)))
	}
	word := func(w string) string {
		var s strings.Builder
		for _, c := range w {
			s.WriteString(encodedChar(byte(c)))
		}
		return s.String()
	}
	return `regsub(req.url, "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*", "") ~ {"(?i)^[^?#]*(/|%2f)` + b.String() + `(?:` + word("status") + `|` + word("info") + `)(?:/|%2f|[?#;]|$)"}`
}()

// fpmStatusCondition holds for a URL whose path is a PHP-FPM pool's
// status path p (sensor.phpfpm), however it is written: slashes
// repeated, any character percent-encoded, after a dot-segment.
func fpmStatusCondition(p string) string {
	var b strings.Builder
	for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
		b.WriteString(`(?:/|%2f)+`)
		for i := 0; i < len(seg); i++ {
			b.WriteString(encodedChar(seg[i]))
		}
	}
	return `regsub(req.url, "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*", "") ~ {"(?i)^(?:[^?#]*(?:/|%2f)(?:\.|%2e){1,2})?` + b.String() + `(?:/|%2f)*(?:[?#;]|$)"}`
}

// encodedChar is a regex matching c as itself or percent-encoded.
func encodedChar(c byte) string {
	return fmt.Sprintf("(?:%s|%%%02x)", literal(c), c)
}

// hostHeader writes a backend host as a Host header holds it: an IPv6
// address in brackets.
func hostHeader(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]"
	}
	return host
}

// vclDuration writes d as a VCL duration literal.
func vclDuration(d time.Duration) string {
	switch {
	case d != 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d != 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// aclEntry writes an address or CIDR as a VCL ACL entry.
func aclEntry(s string) (string, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return fmt.Sprintf("%q", a.String()), nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		// VCL refuses a prefix with host bits set unless told otherwise.
		p = p.Masked()
		return fmt.Sprintf("%q/%d", p.Addr().String(), p.Bits()), nil
	}
	return "", fmt.Errorf("%q is not an IP address or CIDR (e.g. 10.0.0.0/8)", s)
}

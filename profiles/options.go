package profiles

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// Options is the `profiles:` block of gearshift's config: the values
// rendered into the three VCL programs.
type Options struct {
	StaticTTL       timefmt.Duration `yaml:"static_ttl"`        // TTL of static objects, in every gear
	HeavyMinTTL     timefmt.Duration `yaml:"heavy_min_ttl"`     // least TTL heavy gives an anonymous page
	HeavySessionTTL timefmt.Duration `yaml:"heavy_session_ttl"` // TTL of a page heavy caches for one session
	HeavyGrace      timefmt.Duration `yaml:"heavy_grace"`       // how long heavy serves a stale page while it fetches a fresh one
	NormalizeHost   bool             `yaml:"normalize_host"`    // lowercase the Host and drop its port before the cache
	ExposeHeaders   bool             `yaml:"expose_headers"`    // add X-Cache and X-Gearshift-Profile to responses
	// SessionCookies names the cookies that make a session request;
	// []: every cookie not in IgnoreCookies does.
	SessionCookies []string `yaml:"session_cookies"` // names or globs
	// IgnoreCookies are harmless cookies (analytics, consent, A/B tests):
	// never a session, removed from requests before the cache.
	IgnoreCookies []string `yaml:"ignore_cookies"` // names or globs
	// StripSetCookies are cookies heavy may strip from an anonymous
	// response, to share it; []: none.
	StripSetCookies  []string `yaml:"strip_set_cookies"` // names or globs
	StaticExtensions []string `yaml:"static_extensions"` // file extensions cached as static objects in every gear
	NeverCache       []string `yaml:"never_cache"`       // path regexes never cached, in any gear
	PurgeACL         []string `yaml:"purge_acl"`         // addresses or CIDRs that may send PURGE
	// PurgeTokenFile holds the secret a PURGE or BAN over HTTP must carry
	// in X-Purge-Token; "": only a purge_acl client that did not come
	// through a proxy may send one.
	PurgeTokenFile string `yaml:"purge_token_file"`
	// TrustedProxies are the proxies in front of Varnish (a TLS
	// terminator, a CDN) whose X-Forwarded-For and X-Forwarded-Proto
	// are kept; everyone else's are replaced or dropped.
	TrustedProxies []string `yaml:"trusted_proxies"` // addresses or CIDRs
	// WebsocketPaths are the path prefixes where a websocket handshake
	// is piped to the backend; []: none, an Upgrade is dropped.
	WebsocketPaths []string `yaml:"websocket_paths"`
	PassHeaders    []string `yaml:"pass_headers"` // request headers that make a request uncacheable
	// ClientBudget bounds each client's backend-bound requests (misses
	// and passes) in moderate and heavy; a rate of 0: no budget.
	ClientBudget Budget `yaml:"client_budget"`
	// ModerateHeuristicTTL is moderate's TTL for anonymous responses with no
	// freshness information; 0: none.
	ModerateHeuristicTTL timefmt.Duration `yaml:"moderate_heuristic_ttl"`
	// DropQueryParams are query parameters (tracking: utm_*, fbclid)
	// removed from every request's URL before the cache key; []: none.
	DropQueryParams []string `yaml:"drop_query_params"` // names or globs with *
	SortQuery       bool     `yaml:"sort_query"`        // put the query's parameters in one order for the cache key
	// KeepWarm stores, in light and moderate, the anonymous pages heavy
	// would store, for heavy (and stale_if_error) alone to serve.
	KeepWarm bool `yaml:"keep_warm"`
	// StaleIfError is how old a stored copy an anonymous visitor may get,
	// in any gear, when the backend fails or is full; 0: never.
	StaleIfError timefmt.Duration `yaml:"stale_if_error"`
	// GuestPages: auto, heavy shares the anonymous pages that set a
	// cookie once the daemon has found them the same for two new
	// visitors; off, such a page goes to its visitor alone (0.3).
	GuestPages string `yaml:"guest_pages"`
	// GuestListen is where the daemon answers heavy's asks for guest
	// pages: an IP address and port every Varnish target reaches.
	GuestListen string `yaml:"guest_listen"`
	// SoftPurge names the gears where a PURGE over HTTP marks the
	// anonymous copies stale instead of removing them: heavy (the
	// default), always or never (docs/purges.md).
	SoftPurge string `yaml:"soft_purge"`
	Light     Source `yaml:"light"`
	Moderate  Source `yaml:"moderate"`
	Heavy     Source `yaml:"heavy"`
}

// Budget is a token bucket: Rate requests a second, Burst at once.
type Budget struct {
	Rate  float64 `yaml:"rate"`  // requests a second, sustained; 0: no budget
	Burst int     `yaml:"burst"` // requests at once, after a quiet spell
}

// DefaultBudget is profiles.client_budget's default: 10 backend-bound
// requests a second and 100 at once, per client. A person reading a site
// sends a page a few seconds apart, and a page's uncached requests (an
// editor's screen, a shop's cart) come in bursts of tens, each far under
// it; a client over it for long is a script.
var DefaultBudget = Budget{Rate: 10, Burst: 100}

// Sources returns each gear's source, by state. A gear added to state.All
// fails to compile here until it has its field in Options.
func (p *Options) Sources() [len(state.All)]*Source {
	return [...]*Source{state.Light: &p.Light, state.Moderate: &p.Moderate, state.Heavy: &p.Heavy}
}

// Source optionally replaces a gear's built-in VCL with a user's file, used verbatim.
type Source struct {
	VCLFile string `yaml:"vcl_file"` // a VCL file used verbatim for the gear; "": the built-in template
}

// Backend is the origin server (Apache) the rendered profiles point at.
type Backend struct {
	Host string `yaml:"host"` // the origin server (Apache) the profiles send requests to
	Port int    `yaml:"port"` // its port
	// FirstByteTimeout is how long Varnish waits for the backend's answer
	// to begin before the fetch fails (and a stale copy is served).
	FirstByteTimeout timefmt.Duration `yaml:"first_byte_timeout"`
	// MaxConnections bounds Varnish's connections to the backend; a fetch
	// over it fails at once. 0: what the web server's own config takes
	// (see DetectMaxConnections).
	MaxConnections int `yaml:"max_connections"`
	// SessionReserve is how many of the max_connections anonymous
	// visitors' fetches never take: kept for logged-in users and writes.
	// auto (the default): a quarter, rounded up, of a max_connections of
	// 4 or more, else 0; 0 turns the reserve off (docs/gears.md).
	SessionReserve Reserve `yaml:"session_reserve"`
	Probe          Probe   `yaml:"probe"` // the health probe
}

// Reserve is backend.session_reserve: a number of connections, or
// ReserveAuto, written "auto".
type Reserve int

// ReserveAuto is backend.session_reserve's default: the connections are
// derived from max_connections (see Backend.Reserve).
const ReserveAuto Reserve = math.MinInt32

// minReserved is the least max_connections the automatic reserve keeps
// any connection of: below it, a quarter would leave the anonymous
// visitors' misses too few to refresh the cache with.
const minReserved = 4

// String writes r as the config does: "auto" or the number.
func (r Reserve) String() string {
	if r == ReserveAuto {
		return "auto"
	}
	return strconv.Itoa(int(r))
}

// MarshalYAML writes "auto" or the number.
func (r Reserve) MarshalYAML() (any, error) {
	if r == ReserveAuto {
		return "auto", nil
	}
	return int(r), nil
}

// UnmarshalYAML reads "auto" or a whole number (Check refuses a negative
// one, with its key).
func (r *Reserve) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*r = ReserveAuto
		return nil
	}
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v == int(ReserveAuto) {
		return fmt.Errorf("line %d: want auto or a number of connections, got %q", n.Line, n.Value)
	}
	*r = Reserve(v)
	return nil
}

var (
	_ yaml.Marshaler   = Reserve(0)
	_ yaml.Unmarshaler = (*Reserve)(nil)
)

// Reserve returns the connections of session_reserve against the
// effective max_connections: auto's quarter (rounded up, none below
// minReserved connections), or the number written, at most
// maxConnections-1 so that anonymous visitors keep one (validation
// refuses more).
func (b Backend) Reserve(maxConnections int) int {
	r := int(b.SessionReserve)
	if b.SessionReserve == ReserveAuto {
		if maxConnections < minReserved {
			return 0
		}
		r = maxConnections - maxConnections*3/4
	}
	return max(0, min(r, maxConnections-1))
}

// ReserveFor is Reserve for a config with sites or without: with sites,
// auto keeps no reserve. Carved from the server's limit, the reserve
// leaves the neighbours' anonymous visitors only what a surging site's
// misses do not hold (in TestSitesSurge, 7 of a neighbour's 100 visitors
// got a 503 with it); a number written holds (docs/sessions.md).
func (b Backend) ReserveFor(maxConnections int, sites bool) int {
	if sites && b.SessionReserve == ReserveAuto {
		return 0
	}
	return b.Reserve(maxConnections)
}

// Probe is the backend health probe: Varnish fetches URL every Interval
// and calls the backend healthy while Threshold of the last Window
// fetches answered 200 within Timeout.
type Probe struct {
	URL       string           `yaml:"url"`       // the path probed; "": no probe
	Interval  timefmt.Duration `yaml:"interval"`  // time between two probes
	Timeout   timefmt.Duration `yaml:"timeout"`   // a probe not answered 200 by then failed
	Window    int              `yaml:"window"`    // how many of the last probes count
	Threshold int              `yaml:"threshold"` // how many of them must have succeeded: healthy
}

// Site is what the profiles are built from: the `profiles:` and `backend:`
// blocks of gearshift's config, and the targets' admin secret files, which
// a vcl_file must never be (varnish.targets[i].secret_file, by i).
type Site struct {
	Options     Options
	Backend     Backend
	SecretFiles []string
	// NoModules renders for a Varnish without varnish-modules (xkey,
	// vsthrottle): a session's pages dropped by a ban, no client budget.
	// Build renders both.
	NoModules bool
	// PurgeToken is the trimmed content of profiles.purge_token_file;
	// Build reads it.
	PurgeToken string
	// GuestSecret is the secret the daemon's guest answers carry, made
	// at its start (guest.NewSecret): heavy stores only the answers
	// that carry it. "" renders heavy without asking the daemon (guest
	// pages off, or the daemon cannot listen at guest_listen); offline
	// renderings carry RedactedGuestSecret.
	GuestSecret string
	// StatusPaths are the paths of the PHP-FPM status pages gearshift
	// reads (sensor.phpfpm): like Apache's /server-status, never answered
	// through Varnish.
	StatusPaths []string
	// Routes are the config's sites (nil without a sites key): each
	// profile tells a request's site as the router does.
	Routes []Route
}

// RedactedGuestSecret stands in for the daemon's guest secret where a
// profile is shown or exported (profiles show, profiles export): the
// secret is the running daemon's alone, and a copy would let anyone who
// reads the file answer for it.
const RedactedGuestSecret = "redacted0guest0secret0of0the0running0daemon"

// GuestSecretHeader is the header of the daemon's guest answers that
// carries Site.GuestSecret; Varnish never sends it in its asks.
const GuestSecretHeader = "X-Gs-Guest-Secret"

// Label is the VCL label gearshift keeps pointed at the current gear's
// profile in label mode; the site's VCL hands requests to it with
// return (vcl(gearshift)).
const Label = "gearshift"

// DefaultOptions returns the defaults of the `profiles:` block.
func DefaultOptions() Options {
	return Options{
		StaticTTL:            timefmt.Duration(time.Hour),
		HeavyMinTTL:          timefmt.Duration(2 * time.Minute),
		HeavySessionTTL:      timefmt.Duration(30 * time.Second),
		HeavyGrace:           timefmt.Duration(10 * time.Minute),
		NormalizeHost:        true,
		ExposeHeaders:        true,
		IgnoreCookies:        DefaultIgnoreCookies(),
		StaticExtensions:     []string{"png", "gif", "jpg", "jpeg", "ico", "svg", "webp", "css", "js", "woff", "woff2", "ttf", "swf", "mp4", "pdf"},
		NeverCache:           []string{`^/wp-admin`, `^/wp-login\.php`, `^/administrator`, `^/user/login`, `^/admin`, `^/cart`, `^/checkout`, `^/my-account`},
		PurgeACL:             []string{"127.0.0.1", "::1"},
		TrustedProxies:       []string{"127.0.0.1", "::1"},
		PassHeaders:          []string{"Authorization", "X-WP-Nonce", "X-CSRF-Token"},
		ClientBudget:         DefaultBudget,
		ModerateHeuristicTTL: timefmt.Duration(30 * time.Second),
		DropQueryParams:      DefaultDropQueryParams(),
		SortQuery:            true,
		KeepWarm:             true,
		StaleIfError:         timefmt.Duration(10 * time.Minute),
		GuestPages:           GuestAuto,
		GuestListen:          DefaultGuestListen,
		SoftPurge:            DefaultSoftPurge,
	}
}

// The values of profiles.guest_pages.
const (
	GuestAuto = "auto"
	GuestOff  = "off"
)

// DefaultGuestListen is profiles.guest_listen's default: loopback, beside
// Varnish's 6081 and 6082.
const DefaultGuestListen = "127.0.0.1:6089"

// GuestShared is the value of the daemon's X-Gs-Guest answer header on a
// guest copy; heavy's VCL (gearshift_guest_answer) accepts only it.
const GuestShared = "shared"

// GuestNoLog is the VCL_Log record of heavy's ask that the daemon
// answered no (or could not answer): a transaction of its own in the
// Varnish log, retried at the backend, and no backend request itself.
const GuestNoLog = "gearshift-guest: no"

// Guests tells whether heavy asks the daemon for guest pages.
func (p *Options) Guests() bool { return p.GuestPages == GuestAuto }

// DefaultBackend is the `backend:` block's default: Apache on 8080, a
// fetch failing after 30 s without an answer (PHP's max_execution_time),
// the connection limit taken from the web server's config, and a probe of
// / every 2 s.
var DefaultBackend = Backend{
	Host:             "127.0.0.1",
	Port:             8080,
	FirstByteTimeout: timefmt.Duration(30 * time.Second),
	SessionReserve:   ReserveAuto,
	Probe: Probe{
		URL:       "/",
		Interval:  timefmt.Duration(2 * time.Second),
		Timeout:   timefmt.Duration(time.Second),
		Window:    5,
		Threshold: 3,
	},
}

// BackendAt is the default backend block with the origin at host:port.
func BackendAt(host string, port int) Backend {
	b := DefaultBackend
	b.Host, b.Port = host, port
	return b
}

// DefaultDropQueryParams are the query parameters that advertising,
// social networks and newsletters add to a link for the browser's
// analytics scripts: no page renders differently for them.
func DefaultDropQueryParams() []string {
	return []string{
		"utm_*", "fbclid", "gclid", "gbraid", "wbraid", "dclid", "msclkid",
		"yclid", "twclid", "ttclid", "igshid", "mc_cid", "mc_eid", "_ga",
		"_gl", "_hsenc", "_hsmi", "mkt_tok", "srsltid",
	}
}

// DefaultIgnoreCookies are the cookies known to identify nobody: set by
// analytics, advertising, consent and A/B-testing scripts for their own
// use, and the non-identifying cookies of the CMSs gearshift knows. A
// cookie is added here only when no server-side code decides a page by
// it for one user.
func DefaultIgnoreCookies() []string {
	return []string{
		// Google Analytics, Tag Manager and Ads. Each glob matches its
		// vendor's names only: "_gat*" would match a site's own
		// _gateway_session.
		"_ga", "_ga_*", "_gid", "_gat", "_gat_*", "_gcl_*", "__utma", "__utmb",
		"__utmc", "__utmt", "__utmt_*", "__utmz", "__utmv", "_dc_gtm_*",
		// Meta, Microsoft (Clarity, Bing), Hotjar, Matomo, HubSpot, TikTok,
		// Pinterest, LinkedIn.
		"_fbp", "_fbc", "_clck", "_clsk", "_uetsid", "_uetvid",
		"_hjSessionUser_*", "_hjSession_*", "_hjid", "_hjFirstSeen",
		"_hjIncludedInSessionSample*", "_hjIncludedInPageviewSample",
		"_hjAbsoluteSessionInProgress", "_hjTLDTest",
		"_pk_id.*", "_pk_ses.*", "_pk_ref.*", "_pk_cvar.*", "_pk_hsr.*",
		"__hstc", "__hssc", "__hssrc", "hubspotutk", "_ttp",
		"_pin_unauth", "li_gc", "_tt_enable_cookie",
		// Consent managers: Cookiebot, OneTrust, CookieYes, Complianz,
		// GDPR Cookie Consent, IAB TCF.
		"CookieConsent", "OptanonConsent", "OptanonAlertBoxClosed",
		"cookieyes-consent", "cmplz_*", "cookielawinfo-*",
		"viewed_cookie_policy", "euconsent-v2",
		// WordPress: the login page's cookie check and the chosen
		// language of the login form.
		"wordpress_test_cookie", "wp_lang",
		// Drupal 7's JavaScript check.
		"has_js",
	}
}

var (
	extRE    = regexp.MustCompile(`^[A-Za-z0-9]+$`)
	headerRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)
)

// Check reports what is wrong with the options, by config key
// ("profiles.never_cache[2]"). Build trusts options that pass it.
func (p *Options) Check(problem func(key, format string, args ...any)) {
	for _, d := range []struct {
		key  string
		val  timefmt.Duration
		zero bool // 0 allowed
	}{
		{"static_ttl", p.StaticTTL, false},
		{"heavy_min_ttl", p.HeavyMinTTL, false},
		{"heavy_session_ttl", p.HeavySessionTTL, false},
		{"heavy_grace", p.HeavyGrace, true},
		{"moderate_heuristic_ttl", p.ModerateHeuristicTTL, true},
		{"stale_if_error", p.StaleIfError, true},
	} {
		switch {
		case d.val < 0 && d.zero:
			problem("profiles."+d.key, "must not be negative, got %s", d.val)
		case d.val < 0 || (d.val == 0 && !d.zero):
			problem("profiles."+d.key, "must be positive, got %s", d.val)
		}
	}
	for _, l := range []struct {
		key   string
		globs []string
	}{
		{"session_cookies", p.SessionCookies},
		{"ignore_cookies", p.IgnoreCookies},
		{"strip_set_cookies", p.StripSetCookies},
	} {
		for i, name := range l.globs {
			if _, err := CookieGlobRegex(name); err != nil {
				problem(fmt.Sprintf("profiles.%s[%d]", l.key, i), "%v", err)
			}
		}
	}
	for i, name := range p.DropQueryParams {
		if _, err := QueryGlobRegex(name); err != nil {
			problem(fmt.Sprintf("profiles.drop_query_params[%d]", i), "%v", err)
		}
	}
	for i, ext := range p.StaticExtensions {
		if !extRE.MatchString(ext) {
			problem(fmt.Sprintf("profiles.static_extensions[%d]", i), "%q is not a file extension (letters and digits, no dot)", ext)
		}
	}
	for i, re := range p.NeverCache {
		key := fmt.Sprintf("profiles.never_cache[%d]", i)
		if re == "" {
			problem(key, "an empty pattern would match every path")
			continue
		}
		if strings.Contains(re, `"}`) || strings.ContainsAny(re, "\r\n") {
			problem(key, "%q cannot go into a VCL string (no newline, no \"})", re)
			continue
		}
		// Varnish's regexes are PCRE; Go's RE2 is the same language but for
		// lookarounds and the like, which are left to Varnish to judge.
		var se *syntax.Error
		if _, err := regexp.Compile(re); err != nil && !(errors.As(err, &se) && se.Code == syntax.ErrInvalidPerlOp) {
			problem(key, "%q is not a valid regex: %s", re, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	for i, h := range p.PassHeaders {
		if !headerRE.MatchString(h) {
			problem(fmt.Sprintf("profiles.pass_headers[%d]", i), "%q is not a header name (letters, digits and -)", h)
		}
	}
	for _, l := range []struct {
		key   string
		addrs []string
	}{{"purge_acl", p.PurgeACL}, {"trusted_proxies", p.TrustedProxies}} {
		for i, a := range l.addrs {
			if _, err := netip.ParseAddr(a); err == nil {
				continue
			}
			if _, err := netip.ParsePrefix(a); err == nil {
				continue
			}
			problem(fmt.Sprintf("profiles.%s[%d]", l.key, i), "%q is not an IP address or CIDR (e.g. 10.0.0.0/8)", a)
		}
	}
	switch p.GuestPages {
	case GuestAuto, GuestOff:
	default:
		problem("profiles.guest_pages", "must be auto or off, got %q", p.GuestPages)
	}
	p.checkSoftPurge(problem)
	if p.Guests() {
		if _, err := netip.ParseAddrPort(p.GuestListen); err != nil {
			problem("profiles.guest_listen", "%q is not an IP address and port (e.g. %s)", p.GuestListen, DefaultGuestListen)
		}
	}
	if b := p.ClientBudget; b.Rate < 0 || math.IsNaN(b.Rate) || math.IsInf(b.Rate, 0) {
		problem("profiles.client_budget.rate", "must be a number of requests a second, 0 (no budget) or more, got %v", b.Rate)
	} else if b.Rate > 0 && b.Burst < 1 {
		problem("profiles.client_budget.burst", "must be 1 or more requests with a rate above 0, got %d", b.Burst)
	} else if b.Rate > 0 && float64(b.Burst)/b.Rate > 24*3600 {
		problem("profiles.client_budget", "burst %d at rate %v takes more than a day to refill: raise the rate", b.Burst, b.Rate)
	}
	for i, w := range p.WebsocketPaths {
		if !probeURLRE.MatchString(w) || strings.ContainsAny(w, "?#{}") {
			problem(fmt.Sprintf("profiles.websocket_paths[%d]", i), "%q is not a path prefix such as /ws/", w)
		}
	}
}

// Check reports what is wrong with the `backend:` block, by config key.
func (b *Backend) Check(problem func(key, format string, args ...any)) {
	if b.FirstByteTimeout <= 0 {
		problem("backend.first_byte_timeout", "must be positive, got %s", b.FirstByteTimeout)
	}
	if b.MaxConnections < 0 {
		problem("backend.max_connections", "must be 0 (taken from the web server's config) or a number of connections, got %d", b.MaxConnections)
	}
	if r := b.SessionReserve; r != ReserveAuto && r < 0 {
		problem("backend.session_reserve", "must be auto, 0 (off) or a number of connections, got %d", r)
	} else if r != ReserveAuto && b.MaxConnections > 0 && int(r) >= b.MaxConnections {
		problem("backend.session_reserve", "%d is not below backend.max_connections (%d): anonymous visitors would have no connection left", r, b.MaxConnections)
	}
	pr := b.Probe
	if pr.URL == "" {
		return
	}
	if !probeURLRE.MatchString(pr.URL) {
		problem("backend.probe.url", "%q is not a path such as /health (\"\" turns the probe off)", pr.URL)
	}
	if pr.Interval <= 0 {
		problem("backend.probe.interval", "must be positive, got %s", pr.Interval)
	}
	if pr.Timeout <= 0 {
		problem("backend.probe.timeout", "must be positive, got %s", pr.Timeout)
	}
	if pr.Window < 1 || pr.Window > 64 {
		problem("backend.probe.window", "must be between 1 and 64 probes, got %d", pr.Window)
	}
	if pr.Threshold < 1 || pr.Threshold > pr.Window {
		problem("backend.probe.threshold", "must be between 1 and backend.probe.window (%d), got %d", pr.Window, pr.Threshold)
	}
}

// probeURLRE matches a request target the probe can send: a path and
// query, no white space or quote.
var probeURLRE = regexp.MustCompile(`^/[^\s"\\]*$`)

// CheckVCLFile refuses a vcl_file that cannot be a VCL program: one of the
// targets' admin secrets (Varnish's compiler would quote it in its error,
// into logs and status), or a file without a VCL declaration. text is the
// file's content, or nil to read it here. The error never quotes the file.
func (s *Site) CheckVCLFile(path string, text []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cannot stat %s: %v", path, unwrapPathError(err))
	}
	for i, secret := range s.SecretFiles {
		if secret == "" {
			continue
		}
		if si, err := os.Stat(secret); err == nil && os.SameFile(fi, si) {
			return fmt.Errorf("%s is the admin secret of varnish.targets[%d], not a VCL program", path, i)
		}
	}
	if text == nil {
		if text, err = os.ReadFile(path); err != nil {
			return fmt.Errorf("cannot read %s: %v", path, unwrapPathError(err))
		}
	}
	if !hasVCLDeclaration(text) {
		return fmt.Errorf("%s is not a VCL program: it does not start with \"vcl 4.0;\" or \"vcl 4.1;\" (only comments may come first)", path)
	}
	return nil
}

var vclDeclaration = regexp.MustCompile(`^vcl[ \t\r\n]+4\.[01][ \t\r\n]*;`)

// hasVCLDeclaration tells whether text starts with a VCL 4.0 or 4.1
// declaration, after white space and comments (#, // and /* */).
func hasVCLDeclaration(text []byte) bool {
	s := string(text)
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "#") || strings.HasPrefix(s, "//"):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return false
			}
			s = s[end+1:]
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return false
			}
			s = s[2+end+2:]
		default:
			return vclDeclaration.MatchString(s)
		}
	}
}

// unwrapPathError drops the operation and path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

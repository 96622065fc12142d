package profiles

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gearshift/gearshift/controller/state"
)

// ReasonLog starts the VCL_Log record the built-in profiles write for every
// backend fetch: "gearshift-reason: WORD [DETAIL…]", WORD one of Reasons,
// DETAIL fields such as "cookie=NAME" (session, set_cookie), "header=NAME"
// (pass_header) or "status=N" (uncacheable_status). A reader finds the
// record with this prefix and the word after it.
const ReasonLog = "gearshift-reason: "

// ReasonCookie starts the detail field naming a cookie: the one that made
// a request a session's, or the one a response sets.
const ReasonCookie = "cookie="

// Reason is one word of the fixed list: why a request reached the backend.
type Reason struct {
	Word    string // what the VCL_Log record says
	Meaning string // when a fetch gets it
	Setting string // what would change it, for an operator
}

// Reasons is the fixed list of reason words, in the order a reader shows
// them. A word the templates log must be here (rendering fails otherwise).
var Reasons = []Reason{
	{"method", "the request's method is not GET or HEAD (a form, xmlrpc.php, an API write): never cached",
		"nothing to cache: rate-limit or block the URL if it is a flood (POST /xmlrpc.php)"},
	{"never_cache", "the path matches profiles.never_cache (admin, login, cart), or resolves elsewhere than it reads (dot-segments, encoded letters)",
		"profiles.never_cache, if a pattern is broader than the pages it protects"},
	{"pass_header", "the request carries Authorization or a header of profiles.pass_headers (the detail names it)",
		"profiles.pass_headers"},
	{"session", "the request carries a session cookie (the detail names the first): passed in moderate, cached per session in heavy",
		"add the cookie to profiles.ignore_cookies if it does not identify a user (analytics, consent, A/B tests)"},
	{"set_cookie", "the response sets a cookie (the detail names the first), so it goes to its visitor alone",
		"heavy shares the pages the daemon finds the same for every new visitor (profiles.guest_pages: auto); profiles.strip_set_cookies, if heavy may drop that cookie from every shared page; or stop the site from setting it on every page"},
	{"guest", "heavy stored a guest page: the daemon fetched it twice as two new visitors, found it the same, and handed over the copy without its Set-Cookie (profiles.guest_pages)",
		"nothing: one fetch per page per heavy_min_ttl, plus the daemon's two"},
	{"no_store", "the response's caching headers keep it out of this gear: no-store (any gear), Vary: *, or in moderate no-cache, max-age=0, a past Expires or no freshness at all (the detail says which)",
		"moderate: profiles.moderate_heuristic_ttl for pages without freshness; heavy ignores all but no-store; otherwise the site's headers"},
	{"private", "an anonymous response says Cache-Control: private",
		"the site's headers (heavy caches a session's private pages per session, never an anonymous one)"},
	{"uncacheable_status", "the status is not one a cache may keep (401, 403, 5xx without a stale copy…), or a redirect to another name of the same host (the detail has the status)",
		"the backend's errors: see the status"},
	{"miss", "a cacheable request not in the cache yet, or whose copy expired",
		"profiles.heavy_min_ttl and heavy_grace (longer keeps more); a crawl of distinct URLs (?s=…) misses whatever the TTL"},
	{"expired", "a background refresh of a stale copy served in grace",
		"profiles.heavy_min_ttl, profiles.static_ttl (a longer TTL refreshes less often)"},
	{"hit_for_miss", "the URL's last response was not cacheable (a hit-for-miss marker), this one was fetched again",
		"the reason the previous response got"},
	{"static_miss", "a static object (profiles.static_extensions) not in the cache yet",
		"profiles.static_ttl"},
	{state.Lightest.String(), "the light gear passes every page that is not a static object",
		"the gear: rules and hysteresis (light is for a lightly loaded server)"},
	{"over_budget", "a client of moderate or heavy sent more misses and passes than profiles.client_budget allows, or had half of backend.max_connections at the backend already (the detail names the client, and in_flight=N for the second): it got a stored copy or 429, and the backend nothing; logged by the client's request, not a backend fetch",
		"profiles.client_budget, if that client is many people (a proxy: list it in profiles.trusted_proxies) or a crawler you want"},
	{"backend_full", "with sites, the backend already held backend.max_connections of this server's requests, the anonymous visitors' share of it (less backend.session_reserve), or the site's max_connections of its own, over every gear (the detail says which): an anonymous visitor got a stored copy, else 503 at once, and the backend nothing; logged by the client's request, not a backend fetch",
		"sites[].max_connections (a site's share of the backend), backend.max_connections and backend.session_reserve; a surging site's neighbours and the logged-in users keep the rest"},
	{"warm", "moderate has a copy that only heavy serves (kept warm for it, profiles.keep_warm, or left by heavy): this visitor gets the backend's answer",
		"the site's headers (moderate caches what they allow); profiles.moderate_heuristic_ttl for pages without freshness"},
}

// LookupReason returns the reason of word, if it is one.
func LookupReason(word string) (Reason, bool) {
	for _, r := range Reasons {
		if r.Word == word {
			return r, true
		}
	}
	return Reason{}, false
}

// reasonLiteral is word as a VCL string, for the templates: a word not in
// Reasons is a rendering error, so the log never says one a reader does
// not know.
func reasonLiteral(word string) (string, error) {
	if _, ok := LookupReason(word); !ok {
		return "", fmt.Errorf("%q is not a reason word (profiles.Reasons)", word)
	}
	return strconv.Quote(word), nil
}

// notSiteBackends are the profiles' backends whose refusals at their
// connection limit turn no fetch of the site's away: the asks to the
// gearshift daemon (guest pages), the probe's that nothing is fetched
// from, and the spare connections, whose refusal is tried again on
// gearshift_copies (and counted there when that is full too).
var notSiteBackends = []string{"gearshift_guest", "gearshift_probe", "gearshift_spare"}

// TurnsFetchesAway tells whether the backend a varnishstat VBE counter
// or a FetchError names (with whatever VCL name is around it) being busy
// turned a fetch of the site's away: what backend_busy counts.
func TurnsFetchesAway(backend string) bool {
	for _, b := range notSiteBackends {
		if strings.Contains(backend, b) {
			return false
		}
	}
	return true
}

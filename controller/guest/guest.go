// Package guest finds the anonymous pages that are the same for every new
// visitor on a site that gives every visitor a session, and hands heavy a
// copy of each to share (profiles.guest_pages, docs/gears.md).
//
// Heavy asks the daemon, over HTTP at profiles.guest_listen, for an
// anonymous page whose last answer set a cookie (a hit-for-miss) and for
// a guest copy whose TTL ran out. For each ask the Server fetches the
// page from the backend twice, as two new visitors with no cookies and
// the same plain headers, and compares: when both answers are 200, carry
// none of the cookies they set in their bodies, say nothing heavy would
// never share, and have the same body and the same headers a visitor
// keeps, the second is the copy, sent without its Set-Cookie. Anything
// else is a no: Varnish then fetches the page from the backend as 0.3
// did. Nothing is shared that was not compared in that ask, so a page
// that starts to carry a token stops being shared at its next check.
//
// An ask is the path of a page, never an address: the fetch goes to the
// backend whatever the ask names. Checks are bounded for everyone and for
// each client, and every answer carries the Server's secret, so heavy
// stores only what this Server said.
package guest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/gearshift/gearshift/profiles"
)

// Limits of the checks: what one costs the backend is two requests.
const (
	// ChecksPerMinute bounds the checks, new and repeated: at most two
	// backend requests a second, against the hundreds a server that
	// needs heavy answers. A surge is a few pages; their copies are
	// checked again once per heavy_min_ttl each.
	ChecksPerMinute = 60
	// checkBurst lets the pages of a shift to heavy be checked at once.
	checkBurst = 10
	// maxInFlight bounds the checks running at once (each holds a
	// backend connection); an ask beyond it is a no.
	maxInFlight = 4
	// PrivateFor is how long a page found private is answered no
	// without a check.
	PrivateFor = 10 * time.Minute
	// sharedFor is how long a shared page counts as shared without a
	// new check: its copy's life in heavy, TTL and grace, at most.
	sharedFor = 15 * time.Minute
	// maxPages bounds the verdicts kept; beyond it, new ones are not
	// remembered (a flood of random URLs costs checks, bounded above,
	// not memory).
	maxPages = 10000
	// maxBody is the largest page compared and shared.
	maxBody = 4 << 20
	// minSecret is the shortest cookie value looked for in a body:
	// shorter ones ("1", "en") are no secrets and occur by chance.
	minSecret = 8
	// ShownURLs is how many private pages the status names.
	ShownURLs = 5
)

// Header is the response header of the Server's answers: Shared on a
// copy, anything else (No) on a refusal. Heavy keeps it on the stored
// copy, to ask the Server again when the copy expires.
const (
	Header = "X-Gs-Guest"
	Shared = profiles.GuestShared
	No     = "no"
)

// SecretHeader carries Options.Secret on every answer of the Server's.
// Heavy stores a guest answer only when it carries the secret; Varnish
// never sends it in an ask, so whatever else listens at guest_listen
// cannot echo it.
const SecretHeader = profiles.GuestSecretHeader

// whyHeader says why an ask is answered no, in gearshift's words alone:
// never the visitor's bytes.
const whyHeader = "X-Gs-Guest-Why"

// Verdicts.
type kind int

const (
	kindShared  kind = iota + 1
	kindPrivate      // differs between two new visitors, or carries its cookie
	kindOther        // not a page heavy could share: no cookie set, private, not 200
)

type verdict struct {
	kind kind
	why  string
	at   time.Time
}

// Server answers heavy's asks. The zero value is not usable: use New.
type Server struct {
	backend string // host:port
	secret  string
	client  *http.Client
	log     *zap.Logger
	now     func() time.Time
	limit   *rate.Limiter // everyone's checks

	mu       sync.Mutex
	running  int                // checks running
	clients  budgets            // each client's checks
	pages    map[string]verdict // by pageKey
	inflight map[string]*flight // checks running, by pageKey
	checks   uint64             // checks made
}

// flight is one check that concurrent asks for the page wait for.
type flight struct {
	done   chan struct{}
	ans    answer
	joined int // asks waiting on it beside the one that runs it; s.mu
}

// answer is what a check found: a copy to share, or why not.
type answer struct {
	copy   *http.Response // with body; nil: no
	body   []byte
	reason string
}

// Options configure a Server.
type Options struct {
	Backend string           // the backend's host:port, as the profiles' default backend
	Timeout time.Duration    // per backend fetch (backend.first_byte_timeout); 0: 30 s
	Logger  *zap.Logger      // nil: no logs
	Now     func() time.Time // nil: time.Now
	// Secret is sent in SecretHeader with every answer, and never
	// logged; "": none (NewSecret makes one).
	Secret string
}

// New returns a Server fetching from opts.Backend.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	return &Server{
		backend:  opts.Backend,
		secret:   opts.Secret,
		client:   backendClient(opts.Backend, opts.Timeout),
		log:      opts.Logger,
		now:      opts.Now,
		limit:    rate.NewLimiter(rate.Limit(ChecksPerMinute)/60, checkBurst),
		clients:  budgets{max: maxClients, m: map[netip.Prefix]*budget{}},
		pages:    map[string]verdict{},
		inflight: map[string]*flight{},
	}
}

// NewSecret returns a secret for Options.Secret: 32 random bytes in hex.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read a guest secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ServeHTTP answers one ask of heavy's: the request Varnish would send the
// backend for an anonymous page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.secret != "" {
		w.Header().Set(SecretHeader, s.secret)
	}
	if why := notAnAsk(r); why != "" {
		refuse(w, why)
		return
	}
	ans := s.ask(r.Context(), pageKey(r), clientOf(r), r)
	if ans.copy == nil {
		refuse(w, ans.reason)
		return
	}
	h := w.Header()
	for name, vs := range ans.copy.Header {
		if skipHeader(name) {
			continue
		}
		h[name] = append([]string(nil), vs...)
	}
	h.Set(Header, Shared)
	w.WriteHeader(http.StatusOK)
	w.Write(ans.body)
}

// notAnAsk says why r is not an ask the Server checks, "" when it is: an
// anonymous GET without a body (a check sends it twice), for a path (the
// fetch is the backend's, never the address an ask names).
func notAnAsk(r *http.Request) string {
	switch {
	case r.Method != http.MethodGet || r.ContentLength != 0 || len(r.TransferEncoding) > 0:
		return "not a GET without a body"
	case r.Header.Get("Cookie") != "":
		return "not anonymous"
	case !strings.HasPrefix(r.RequestURI, "/") || r.URL.Scheme != "" || r.URL.Host != "" ||
		r.URL.Opaque != "" || r.URL.User != nil:
		return "not a path"
	}
	return ""
}

// pageKey is what a verdict is about: the host and URL, after the scheme
// the ask's X-Forwarded-Proto names, which the fetch passes on. Varnish
// keeps the schemes apart too (its hash holds the header): behind a TLS
// terminator, http is a redirect to https.
func pageKey(r *http.Request) string {
	key := r.Host + r.URL.RequestURI()
	if p := forwardedProto(r); p != "" {
		key = p + "://" + key
	}
	return key
}

func refuse(w http.ResponseWriter, why string) {
	w.Header().Set(Header, No)
	w.Header().Set(whyHeader, why)
	w.WriteHeader(http.StatusNotFound)
}

// ask answers the ask for key from client: with the check running for
// it, if any, else with a new check when the budgets allow one, else no.
// A no for a budget is no verdict about the page.
func (s *Server) ask(ctx context.Context, key string, client netip.Prefix, r *http.Request) answer {
	now := s.now()
	s.mu.Lock()
	if f := s.inflight[key]; f != nil {
		f.joined++
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.ans
		case <-ctx.Done():
			return answer{reason: "gone"}
		}
	}
	if v, ok := s.pages[key]; ok && v.kind != kindShared && now.Sub(v.at) < PrivateFor {
		s.mu.Unlock()
		return answer{reason: v.why}
	}
	b, why := s.admit(client, now)
	if why != "" {
		s.mu.Unlock()
		return answer{reason: why}
	}
	f := &flight{done: make(chan struct{})}
	s.inflight[key] = f
	s.checks++
	s.mu.Unlock()

	v, ans := s.check(ctx, r)
	s.mu.Lock()
	s.running--
	b.running--
	delete(s.inflight, key)
	if v.kind != 0 {
		v.at = s.now()
		if _, known := s.pages[key]; known || len(s.pages) < maxPages || s.prune(v.at) {
			s.pages[key] = v
		}
	}
	s.mu.Unlock()
	f.ans = ans
	close(f.done)
	if v.kind == kindPrivate {
		s.log.Debug("guest page found private", zap.String("url", key), zap.String("why", v.why))
	}
	return ans
}

// prune forgets the verdicts that have run out; it tells whether there is
// room for one more. s.mu is held.
func (s *Server) prune(now time.Time) bool {
	for k, v := range s.pages {
		if now.Sub(v.at) >= life(v.kind) {
			delete(s.pages, k)
		}
	}
	return len(s.pages) < maxPages
}

func life(k kind) time.Duration {
	if k == kindShared {
		return sharedFor
	}
	return PrivateFor
}

// check fetches the page twice as two new visitors and compares. A fetch
// that fails gives no verdict: the page is not shared, and asked again.
func (s *Server) check(ctx context.Context, r *http.Request) (verdict, answer) {
	var resps [2]*http.Response
	var bodies [2][]byte
	for i := range resps {
		resp, body, err := s.fetch(ctx, r)
		if err != nil {
			return verdict{}, answer{reason: "fetch failed"}
		}
		resps[i], bodies[i] = resp, body
		if v, ok := shareable(resp, body); !ok {
			return v, answer{reason: v.why}
		}
	}
	if !bytes.Equal(bodies[0], bodies[1]) {
		v := verdict{kind: kindPrivate, why: "differs between two new visitors"}
		return v, answer{reason: v.why}
	}
	if name := differentHeader(resps[0].Header, resps[1].Header); name != "" {
		// An ETag, a Link or a header of its own per visitor is a page
		// per visitor, whatever its body.
		v := verdict{kind: kindPrivate, why: "headers differ between two new visitors: " + name}
		return v, answer{reason: v.why}
	}
	return verdict{kind: kindShared, why: "the same for two new visitors"}, answer{copy: resps[1], body: bodies[1]}
}

// shareable judges one answer on its own: a verdict and false when it
// rules the page out. It is at least as strict as what heavy never
// shares (gearshift_never_share), but for Cache-Control: no-store, which
// PHP's session start sends with every page guest pages are for.
func shareable(resp *http.Response, body []byte) (verdict, bool) {
	switch {
	case resp.StatusCode != http.StatusOK:
		return verdict{kind: kindOther, why: fmt.Sprintf("status %d", resp.StatusCode)}, false
	case len(resp.Cookies()) == 0:
		// Not a page that starts a session: heavy's own rules decide it.
		return verdict{kind: kindOther, why: "sets no cookie"}, false
	case hasDirective(resp.Header.Values("Cache-Control"), "private"):
		return verdict{kind: kindOther, why: "Cache-Control: private"}, false
	case hasDirective(resp.Header.Values("Surrogate-Control"), "no-store"):
		return verdict{kind: kindOther, why: "Surrogate-Control: no-store"}, false
	case strings.TrimSpace(resp.Header.Get("Vary")) == "*":
		return verdict{kind: kindOther, why: "Vary: *"}, false
	case !variesOnEncodingAlone(resp.Header.Values("Vary")):
		// The fetch's headers are fixed: a page that varies on others
		// (Accept-Language, User-Agent) was seen in one variant only.
		return verdict{kind: kindOther, why: "Vary: other than Accept-Encoding"}, false
	}
	for _, c := range resp.Cookies() {
		if len(c.Value) >= minSecret && bytes.Contains(body, []byte(c.Value)) {
			// Its session id (or a token kept in a cookie) is in the
			// page: shared, every visitor would hold that session.
			return verdict{kind: kindPrivate, why: "carries the value of cookie " + c.Name}, false
		}
	}
	return verdict{}, true
}

// hasDirective tells whether name (in lower case) is among the directives
// of a Cache-Control-like header, in any case, as heavy's VCL reads them
// ((^|[,\s])name\b): "no-store;edge" and "private=Set-Cookie" count.
func hasDirective(values []string, name string) bool {
	for _, v := range values {
		v = strings.ToLower(v)
		for i := 0; ; {
			j := strings.Index(v[i:], name)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(name)
			if (start == 0 || strings.ContainsRune(", \t", rune(v[start-1]))) && (end == len(v) || !isWordByte(v[end])) {
				return true
			}
			i = start + 1
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// variesOnEncodingAlone tells whether the Vary headers name no request
// header but Accept-Encoding, which the fetch asks and decodes itself.
func variesOnEncodingAlone(values []string) bool {
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !strings.EqualFold(name, "Accept-Encoding") {
				return false
			}
		}
	}
	return true
}

// differentHeader names the first header, in order, that a visitor keeps
// (skipHeader) and that differs between a and b; "" when none does. The
// status needs no comparing: shareable holds both at 200.
func differentHeader(a, b http.Header) string {
	var names []string
	for _, h := range []http.Header{a, b} {
		for name := range h {
			if !skipHeader(name) && !slices.Equal(a[name], b[name]) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return slices.Min(names)
}

// skipHeader: headers of the backend's answer the copy goes without, and
// that need not be the same for two visitors: the cookies and what PHP's
// session start sends with them (no-store, a past Expires), the framing
// Go redoes, an upstream cache's age and ids, and gearshift's own.
// Everything else (ETag, Last-Modified, Link…) is compared.
func skipHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Set-Cookie", "Cache-Control", "Expires", "Pragma", "Content-Length", "Content-Encoding",
		"Transfer-Encoding", "Connection", "Keep-Alive", "Date", "Age", "X-Varnish":
		return true
	}
	return strings.HasPrefix(http.CanonicalHeaderKey(name), "X-Gs-")
}

// Shift forgets every verdict: on a shift to heavy each page is checked
// again (its copies from an earlier heavy are banned by the caller).
func (s *Server) Shift() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.pages)
}

// Stats are what the status says of guest pages.
type Stats struct {
	Shared      int      // pages shared: found the same at their last check
	Private     int      // pages found private (differ, or carry their cookie)
	PrivateURLs []string // the first few of them, pageKey (host and URL), in order
	Checks      uint64   // checks made since start
}

// Stats counts the verdicts in force.
func (s *Server) Stats() Stats {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Checks: s.checks}
	var private []string
	for k, v := range s.pages {
		if now.Sub(v.at) >= life(v.kind) {
			continue
		}
		switch v.kind {
		case kindShared:
			st.Shared++
		case kindPrivate:
			st.Private++
			private = append(private, k)
		}
	}
	sort.Strings(private)
	st.PrivateURLs = private[:min(len(private), ShownURLs)]
	return st
}

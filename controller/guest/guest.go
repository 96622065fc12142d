// Package guest finds the anonymous pages that are the same for every new
// visitor on a site that gives every visitor a session, and hands heavy a
// copy of each to share (profiles.guest_pages, docs/gears.md).
//
// Heavy asks the daemon, over HTTP at profiles.guest_listen, for an
// anonymous page whose last answer set a cookie (a hit-for-miss) and for
// a guest copy whose TTL ran out. For each ask the Server fetches the
// page from the backend twice, as two new visitors with no cookies, and
// compares: when both answers are 200, carry none of the cookies they set
// in their bodies, and have the same body, the second is the copy, sent
// without its Set-Cookie. Anything else is a no: Varnish then fetches the
// page from the backend as 0.3 did. Nothing is shared that was not
// compared in that ask, so a page that starts to carry a token stops
// being shared at its next check.
package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	client  *http.Client
	log     *zap.Logger
	now     func() time.Time
	limit   *rate.Limiter
	slots   chan struct{}

	mu       sync.Mutex
	pages    map[string]verdict // by host + URL
	inflight map[string]*flight // checks running, by host + URL
	checks   uint64             // checks made
}

// flight is one check that concurrent asks for the page wait for.
type flight struct {
	done chan struct{}
	ans  answer
}

// answer is what a check found: a copy to share, or why not.
type answer struct {
	copy   *http.Response // with body; nil: no
	body   []byte
	reason string
}

// Options configure a Server.
type Options struct {
	Backend string        // the backend's host:port, as the profiles' default backend
	Timeout time.Duration // per backend fetch (backend.first_byte_timeout)
	Logger  *zap.Logger
	Now     func() time.Time // nil: time.Now
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
		backend: opts.Backend,
		client: &http.Client{
			Timeout: opts.Timeout,
			// A redirect is the backend's answer, compared as it is.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{
				MaxIdleConnsPerHost: maxInFlight,
				IdleConnTimeout:     30 * time.Second,
			},
		},
		log:      opts.Logger,
		now:      opts.Now,
		limit:    rate.NewLimiter(rate.Limit(ChecksPerMinute)/60, checkBurst),
		slots:    make(chan struct{}, maxInFlight),
		pages:    map[string]verdict{},
		inflight: map[string]*flight{},
	}
}

// ServeHTTP answers one ask of heavy's: the request Varnish would send the
// backend for an anonymous page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.Header.Get("Cookie") != "" {
		refuse(w, "not an anonymous GET")
		return
	}
	key := r.Host + r.URL.RequestURI()
	ans := s.ask(r.Context(), key, r)
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

func refuse(w http.ResponseWriter, why string) {
	w.Header().Set(Header, No)
	w.Header().Set("X-Gs-Guest-Why", why)
	w.WriteHeader(http.StatusNotFound)
}

// ask answers the ask for key: with the check running for it, if any,
// else with a new check when the budget allows one, else no.
func (s *Server) ask(ctx context.Context, key string, r *http.Request) answer {
	now := s.now()
	s.mu.Lock()
	if f := s.inflight[key]; f != nil {
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
	if !s.limit.AllowN(now, 1) {
		s.mu.Unlock()
		return answer{reason: "over the check budget"}
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.mu.Unlock()
		return answer{reason: "checks busy"}
	}
	f := &flight{done: make(chan struct{})}
	s.inflight[key] = f
	s.checks++
	s.mu.Unlock()

	v, ans := s.check(ctx, r)
	<-s.slots
	s.mu.Lock()
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
	return verdict{kind: kindShared, why: "the same for two new visitors"}, answer{copy: resps[1], body: bodies[1]}
}

// shareable judges one answer on its own: a verdict and false when it
// rules the page out.
func shareable(resp *http.Response, body []byte) (verdict, bool) {
	switch {
	case resp.StatusCode != http.StatusOK:
		return verdict{kind: kindOther, why: fmt.Sprintf("status %d", resp.StatusCode)}, false
	case len(resp.Cookies()) == 0:
		// Not a page that starts a session: heavy's own rules decide it.
		return verdict{kind: kindOther, why: "sets no cookie"}, false
	case hasDirective(resp.Header.Values("Cache-Control"), "private"):
		return verdict{kind: kindOther, why: "Cache-Control: private"}, false
	case strings.TrimSpace(resp.Header.Get("Vary")) == "*":
		return verdict{kind: kindOther, why: "Vary: *"}, false
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

func hasDirective(values []string, name string) bool {
	for _, v := range values {
		for _, d := range strings.Split(v, ",") {
			d, _, _ = strings.Cut(d, "=")
			if strings.EqualFold(strings.TrimSpace(d), name) {
				return true
			}
		}
	}
	return false
}

// fetch is one new visitor's request for the page: the request heavy
// would have sent, without cookies and without gearshift's own headers.
func (s *Server) fetch(ctx context.Context, r *http.Request) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.backend+r.URL.RequestURI(), nil)
	if err != nil {
		return nil, nil, err
	}
	for name, vs := range r.Header {
		if skipRequestHeader(name) {
			continue
		}
		req.Header[name] = append([]string(nil), vs...)
	}
	req.Host = r.Host
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, nil, err
	}
	if len(body) > maxBody {
		return nil, nil, errors.New("page too large to compare")
	}
	return resp, body, nil
}

// skipRequestHeader: headers of Varnish's request that a new visitor's
// fetch leaves out. Accept-Encoding is the client's to choose: Go's asks
// for gzip and compares (and shares) the page decoded.
func skipRequestHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Cookie", "Accept-Encoding", "X-Varnish", "Connection", "Keep-Alive", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Proxy-Authorization", "If-None-Match", "If-Modified-Since":
		return true
	}
	return strings.HasPrefix(http.CanonicalHeaderKey(name), "X-Gs-")
}

// skipHeader: headers of the backend's answer the copy goes without: the
// cookies and what PHP's session start sends with them (no-store, a past
// Expires), the framing Go redoes, and gearshift's own.
func skipHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Set-Cookie", "Cache-Control", "Expires", "Pragma", "Content-Length", "Content-Encoding",
		"Transfer-Encoding", "Connection", "Keep-Alive", "Date":
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
	PrivateURLs []string // the first few of them, host and URL, in order
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

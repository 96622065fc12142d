package system

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The open-loop surge's load: visitors arrive at a constant rate whatever
// the server does (vegeta's attacker starts another worker when all are
// waiting), so an overloaded server gets the same requests and their
// latency shows, where a closed loop such as wrk would wait and send fewer.

const (
	surgeTimeout = 5 * time.Second // a visitor's patience: success is a 200 within it
	// surgeZipf is the popularity's exponent: the home page and three
	// posts take about 73 % of the anonymous requests over 41 pages.
	surgeZipf = 1.5
	// surgeFbclid and surgeUTM are the shares of anonymous requests that
	// carry a unique ?fbclid= (a link shared on Facebook) and utm_*
	// parameters (a newsletter's); the rest have no query string.
	surgeFbclid = 0.5
	surgeUTM    = 0.1
)

// surgeMix is the visitors' URL mix: the home page and the posts, each
// request's page drawn with Zipf popularity. Its targeters are safe for
// vegeta's concurrent workers.
type surgeMix struct {
	base  string   // http://host:port requests go to
	host  string   // the Host header: the site's own address, also when base is Apache itself
	pages []string // "/" then the posts, most popular first
	cum   []float64
	index map[string]int // page -> its index in pages
	// The visitors' addresses, in X-Forwarded-For: the load comes from
	// 127.0.0.1, a trusted proxy (profiles.trusted_proxies), as from a
	// TLS terminator such as nginx on the host, and each visitor is known
	// (and budgeted) as itself, not as one local tool (front_door
	// unidentified). visitors: how many anonymous visitors share the
	// requests, one after the other (0: each request a new visitor,
	// crowdSize of them in turn). direct: no X-Forwarded-For (the
	// visitors connect from addresses of their own, as through hitch).
	visitors int
	direct   bool
	next     *atomic.Uint64 // the anonymous requests so far
}

func newSurgeMix(base, host string, posts []string) *surgeMix {
	m := &surgeMix{base: base, host: host, pages: append([]string{"/"}, posts...), index: map[string]int{}, next: &atomic.Uint64{}}
	total := 0.0
	for i := range m.pages {
		total += 1 / math.Pow(float64(i+1), surgeZipf)
		m.cum = append(m.cum, total)
		m.index[m.pages[i]] = i
	}
	for i := range m.cum {
		m.cum[i] /= total
	}
	return m
}

// at returns the mix with requests sent to base instead.
func (m *surgeMix) at(base string) *surgeMix {
	c := *m
	c.base = base
	return &c
}

func (m *surgeMix) page() string {
	i, _ := slices.BinarySearch(m.cum, rand.Float64())
	return m.pages[min(i, len(m.pages)-1)]
}

var (
	utmSources   = []string{"newsletter", "twitter", "linkedin", "mastodon"}
	utmCampaigns = []string{"weekly", "launch", "spring-sale"}
)

// anonymous is the anonymous visitors' targeter: half of them arrive with
// a unique fbclid, a tenth with utm_* parameters.
func (m *surgeMix) anonymous() vegeta.Targeter {
	return func(t *vegeta.Target) error {
		u := m.base + m.page()
		switch r := rand.Float64(); {
		case r < surgeFbclid:
			u += "?fbclid=IwAR" + strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
		case r < surgeFbclid+surgeUTM:
			u += "?utm_source=" + utmSources[rand.IntN(len(utmSources))] + "&utm_medium=email&utm_campaign=" + utmCampaigns[rand.IntN(len(utmCampaigns))]
		}
		*t = vegeta.Target{Method: http.MethodGet, URL: u, Header: m.header("", m.anonAddr())}
		return nil
	}
}

// crowdSize is how many documentation addresses (RFC 5737's 192.0.2.0/24
// and 198.51.100.0/24) the anonymous visitors come from, in turn; the
// logged-in users have 203.0.113.0/24's.
const crowdSize = 2 * 254

// crowdAddr is the n-th anonymous visitor's address (n mod crowdSize).
func crowdAddr(n uint64) string {
	n %= crowdSize
	return fmt.Sprintf("%s.%d", [2]string{"198.51.100", "192.0.2"}[n/254], n%254+1)
}

// userAddr is the i-th logged-in user's address.
func userAddr(i int) string { return fmt.Sprintf("203.0.113.%d", i%254+1) }

// anonAddr is the next anonymous request's visitor address.
func (m *surgeMix) anonAddr() string {
	n := m.next.Add(1) - 1
	if m.visitors > 0 {
		n %= uint64(m.visitors)
	}
	return crowdAddr(n)
}

// crowdOf returns the mix with its anonymous requests shared by n
// visitors, one after the other.
func (m *surgeMix) crowdOf(n int) *surgeMix {
	c := *m
	c.visitors, c.next = n, &atomic.Uint64{}
	return &c
}

// users is the logged-in users' targeter: each request is the next
// user's, with that user's WordPress cookies, on a page of the same mix.
func (m *surgeMix) users(cookies []string) vegeta.Targeter {
	var n atomic.Uint64
	return func(t *vegeta.Target) error {
		i := int(n.Add(1)-1) % len(cookies)
		*t = vegeta.Target{Method: http.MethodGet, URL: m.base + m.page(), Header: m.header(cookies[i], userAddr(i))}
		return nil
	}
}

// header is a request's headers: cookie's when not "", and the visitor's
// address addr in X-Forwarded-For unless the mix is direct or addr "".
func (m *surgeMix) header(cookie, addr string) http.Header {
	h := http.Header{
		"Host":            {m.host},
		"User-Agent":      {"Mozilla/5.0 (gearshift bench-surge)"},
		"Accept":          {"text/html,application/xhtml+xml"},
		"Accept-Encoding": {"gzip"},
	}
	if cookie != "" {
		h.Set("Cookie", cookie)
	}
	if addr != "" && !m.direct {
		h.Set("X-Forwarded-For", addr)
	}
	return h
}

// phase is a stretch of constant arrival rate.
type phase struct {
	rate int // requests per second
	dur  time.Duration
}

// phasePacer paces vegeta through phases, one after the other: a quiet
// trickle, then the surge. Each phase is vegeta's own ConstantPacer.
type phasePacer []phase

var _ vegeta.Pacer = phasePacer(nil)

func (p phasePacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	var off time.Duration
	var before uint64
	for _, ph := range p {
		end := off + ph.dur
		if elapsed < end {
			if hits < before {
				return 0, false // behind: the previous phase's hits first
			}
			if ph.rate == 0 {
				return end - elapsed, false
			}
			wait, stop := vegeta.ConstantPacer{Freq: ph.rate, Per: time.Second}.Pace(elapsed-off, hits-before)
			if stop {
				return 0, true
			}
			return min(wait, end-elapsed), false
		}
		before += uint64(math.Round(float64(ph.rate) * ph.dur.Seconds()))
		off = end
	}
	return 0, true
}

func (p phasePacer) Rate(elapsed time.Duration) float64 {
	var off time.Duration
	for _, ph := range p {
		if off += ph.dur; elapsed < off {
			return float64(ph.rate)
		}
	}
	return 0
}

func (p phasePacer) total() (d time.Duration) {
	for _, ph := range p {
		d += ph.dur
	}
	return d
}

// hit is one request as the benchmark keeps it.
type hit struct {
	at      time.Duration // when it was sent, from the run's start
	latency time.Duration
	code    uint16 // 0: no answer (timeout, connection refused)
	user    bool   // a logged-in user's
	timeout bool   // no answer within surgeTimeout
	cache   string // X-Cache: HIT, MISS, PASS, STALE, or "" without one
	page    int    // index in the mix's pages; -1 when unknown
}

func (h hit) ok() bool { return h.code == http.StatusOK && h.latency <= surgeTimeout }

// good is the time to a good answer: the latency of a 200, the timeout
// for anything else (an error page that comes fast has not served the
// visitor either).
func (h hit) good() time.Duration {
	if h.ok() {
		return h.latency
	}
	return surgeTimeout
}

// transport is the attackers' HTTP transport: no proxy (every address
// is loopback), keep-alive, as many idle connections as visitors.
func transport() *http.Transport {
	return &http.Transport{DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext, MaxIdleConnsPerHost: 10000}
}

// load is a run's traffic: the attacks' results as hits, from start.
type load struct {
	start time.Time
	mix   *surgeMix
	tr    *http.Transport
	mu    sync.Mutex
	hits  []hit
	wg    sync.WaitGroup
}

// newLoad starts a run's traffic on tr, a new transport when nil.
func newLoad(mix *surgeMix, tr *http.Transport) *load {
	if tr == nil {
		tr = transport()
	}
	return &load{start: time.Now(), mix: mix, tr: tr}
}

// attacker is vegeta's attacker as every run uses it, on the load's
// transport: the visitor's timeout, no redirects followed (a redirect is
// not the page), bodies read and dropped; workers to start with and at
// most (0: as many as the rate needs).
func (l *load) attacker(workers, most uint64) *vegeta.Attacker {
	opts := []func(*vegeta.Attacker){vegeta.Client(&http.Client{Transport: l.tr}), vegeta.Timeout(surgeTimeout),
		vegeta.Redirects(vegeta.NoFollow), vegeta.MaxBody(0), vegeta.Workers(workers)}
	if most > 0 {
		opts = append(opts, vegeta.MaxWorkers(most))
	}
	return vegeta.NewAttacker(opts...)
}

// attack starts tr at pacer's rates; its results are kept as hits of user
// (logged-in) or anonymous visitors.
func (l *load) attack(a *vegeta.Attacker, tr vegeta.Targeter, p vegeta.Pacer, d time.Duration, user bool) {
	res := a.Attack(tr, p, d, "")
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for r := range res {
			l.keep(r, user)
		}
	}()
}

func (l *load) keep(r *vegeta.Result, user bool) {
	h := hit{at: r.Timestamp.Sub(l.start), latency: r.Latency, code: r.Code, user: user, page: -1}
	if r.Code == 0 && (strings.Contains(r.Error, "Timeout") || strings.Contains(r.Error, "deadline exceeded")) {
		h.timeout = true
	}
	if r.Headers != nil {
		h.cache = r.Headers.Get("X-Cache")
	}
	if u, err := url.Parse(r.URL); err == nil {
		if i, ok := l.mix.index[u.Path]; ok {
			h.page = i
		}
	}
	l.mu.Lock()
	l.hits = append(l.hits, h)
	l.mu.Unlock()
}

// wait waits for every attack to end, the last request answered or timed
// out, and returns the hits in the order they were sent. The caller
// closes the transport's idle connections when done with it: a prefork
// Apache keeps a worker for each.
func (l *load) wait() []hit {
	l.wg.Wait()
	slices.SortFunc(l.hits, func(a, b hit) int { return int(a.at - b.at) })
	return l.hits
}

// quantile is the q-quantile of ds (nearest rank), 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

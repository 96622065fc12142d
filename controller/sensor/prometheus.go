package sensor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// PrometheusConfig is the `sensor.prometheus` block: signals named by the
// user, each the answer of a PromQL query to a Prometheus server. A fleet
// shares its decisions this way: the highest gear of the fleet, the
// shared database's pressure.
type PrometheusConfig struct {
	// URL is the Prometheus server's base URL (http://127.0.0.1:9090); "": off.
	URL     string           `yaml:"url"`
	Timeout timefmt.Duration `yaml:"timeout"` // per query; a slower answer is unavailable
	// MaxAge is how old the data behind an answer may be, sent as the
	// query's lookback (Prometheus 2.43 and later honour it); older is
	// unavailable.
	MaxAge timefmt.Duration `yaml:"max_age"`
	// BasicAuthFile holds "user:password" for HTTP basic auth; "": none.
	BasicAuthFile string `yaml:"basic_auth_file"`
	// BearerTokenFile holds a bearer token; "": none.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// Signals maps each signal's name (a rule key, status field, trace
	// column, perfdata label) to a PromQL query that gives one number.
	Signals map[string]string `yaml:"signals"`
}

// Limits of the prometheus source.
const (
	maxPrometheusTimeout = 10 * time.Second
	maxPrometheusSignals = 32
	// maxPrometheusAnswer bounds an answer's body: one number is a few
	// hundred bytes; a query that returns a whole fleet's series is cut.
	maxPrometheusAnswer = 1 << 20
)

// signalName is what a named signal may be called: it becomes a rule key,
// a JSON field, a CSV column and a perfdata label.
var signalName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

var prometheusSource = Source{
	Name: "prometheus",
	Key:  "sensor.prometheus.url",
	On:   on(func(cfg HostConfig) string { return cfg.Sensor.Prometheus.URL }),
	Files: func(cfg HostConfig) map[string]string {
		files := map[string]string{}
		if f := cfg.Sensor.Prometheus.BasicAuthFile; f != "" {
			files["sensor.prometheus.basic_auth_file"] = f
		}
		if f := cfg.Sensor.Prometheus.BearerTokenFile; f != "" {
			files["sensor.prometheus.bearer_token_file"] = f
		}
		return files
	},
	Open: func(cfg HostConfig) (Reader, error) { return NewPrometheus(cfg.Sensor.Prometheus) },
}

// checkPrometheus checks the prometheus block. It and prometheusSignals
// are set by init: they read Sources, which holds the row.
func checkPrometheus(cfg HostConfig, problem func(key, format string, args ...any)) {
	p := cfg.Sensor.Prometheus
	if p.URL == "" {
		if len(p.Signals) > 0 {
			problem("sensor.prometheus.url", "must be set: the queries of sensor.prometheus.signals need a Prometheus to ask")
		}
		return
	}
	if _, err := parseHTTPURL(p.URL, "prometheus URL", "http://host:9090"); err != nil {
		problem("sensor.prometheus.url", "%v", err)
	}
	if t := p.Timeout; t <= 0 || t > timefmt.Duration(maxPrometheusTimeout) {
		problem("sensor.prometheus.timeout", "must be positive and at most %s, got %s", timefmt.Duration(maxPrometheusTimeout), t)
	}
	if p.MaxAge <= 0 {
		problem("sensor.prometheus.max_age", "must be positive, got %s", p.MaxAge)
	}
	if p.BasicAuthFile != "" && p.BearerTokenFile != "" {
		problem("sensor.prometheus.bearer_token_file", "give basic_auth_file or bearer_token_file, not both")
	}
	switch n := len(p.Signals); {
	case n == 0:
		problem("sensor.prometheus.signals", "name at least one signal and its query (db_threads_running: 'max(mysql_global_status_threads_running)')")
	case n > maxPrometheusSignals:
		problem("sensor.prometheus.signals", "at most %d signals, got %d", maxPrometheusSignals, n)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Signals)) {
		key := "sensor.prometheus.signals." + name
		switch {
		case !signalName.MatchString(name):
			problem(key, "a signal name is lowercase letters, digits and _, starting with a letter")
		case builtinName(name):
			problem(key, "%s is a built-in signal: name the query otherwise", name)
		case strings.TrimSpace(p.Signals[name]) == "":
			problem(key, "an empty query: give the PromQL expression of one number")
		}
	}
}

func init() {
	prometheusSource.Check = checkPrometheus
	prometheusSource.Named = prometheusSignals
}

// prometheusSignals are the signals the user names, by name. A name the
// check refuses (a built-in's, one no rule key can be) is left out: the
// check says why, and a rule on it is an unknown key.
func prometheusSignals(cfg HostConfig) []state.Signal {
	p := cfg.Sensor.Prometheus
	var sigs []state.Signal
	for _, name := range slices.Sorted(maps.Keys(p.Signals)) {
		if !signalName.MatchString(name) || builtinName(name) {
			continue
		}
		sigs = append(sigs, state.Signal{
			Name: name, Direction: state.Rises, Precision: 2, Min: math.Inf(-1),
			Help:  "The answer of the Prometheus query " + oneLine(p.Signals[name]) + ".",
			Named: true,
		})
	}
	return sigs
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Prometheus reads the user's signals from a Prometheus server, one query
// per signal, all at once, each bounded by the timeout.
type Prometheus struct {
	api     v1.API
	shown   string // the URL without a password, for messages
	timeout time.Duration
	maxAge  time.Duration
	names   []string
	queries []string
	now     func() time.Time
}

// NewPrometheus returns the reader of cfg's queries.
func NewPrometheus(cfg PrometheusConfig) (*Prometheus, error) {
	u, err := parseHTTPURL(cfg.URL, "prometheus URL", "http://host:9090")
	if err != nil {
		return nil, err
	}
	rt := &boundedTransport{
		next:        &http.Transport{Proxy: nil, MaxIdleConnsPerHost: maxPrometheusSignals},
		origin:      origin(u),
		basicAuth:   cfg.BasicAuthFile,
		bearerToken: cfg.BearerTokenFile,
	}
	hc := &http.Client{Transport: rt, CheckRedirect: rt.checkRedirect}
	client, err := api.NewClient(api.Config{Address: cfg.URL, Client: hc})
	if err != nil {
		return nil, fmt.Errorf("prometheus URL %q: %w", u.Redacted(), err)
	}
	p := &Prometheus{
		api: v1.NewAPI(client), shown: u.Redacted(),
		timeout: time.Duration(cfg.Timeout), maxAge: time.Duration(cfg.MaxAge),
		now: time.Now,
	}
	if p.timeout <= 0 {
		p.timeout = time.Second
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Signals)) {
		p.names = append(p.names, name)
		p.queries = append(p.queries, cfg.Signals[name])
	}
	return p, nil
}

// Read implements Reader: every query at once. A query that fails, takes
// longer than the timeout or does not give one number leaves its signal
// unavailable, with the reason in a Problem named "prometheus NAME"; the
// others' answers still count. A query whose series each carry a site
// label gives each site its own number (Sample.Sites), and the server
// none.
func (p *Prometheus) Read(ctx context.Context) (func(*Sample), error) {
	answers := make([]answer, len(p.names))
	errs := make([]error, len(p.names))
	now := p.now()
	var wg sync.WaitGroup
	for i := range p.names {
		wg.Go(func() { answers[i], errs[i] = p.query(ctx, p.queries[i], now) })
	}
	wg.Wait()
	var problems Problems
	got := map[string]answer{}
	for i, name := range p.names {
		if errs[i] != nil {
			problems = append(problems, Problem{Source: "prometheus " + name, Err: errs[i]})
			continue
		}
		got[name] = answers[i]
	}
	apply := func(s *Sample) {
		for name, a := range got {
			a.apply(s, name)
		}
	}
	if len(problems) > 0 {
		return apply, problems
	}
	return apply, nil
}

// query asks one query at now, with max_age as its lookback: an answer
// from older data than that is none.
func (p *Prometheus) query(ctx context.Context, q string, now time.Time) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var opts []v1.Option
	if p.maxAge > 0 {
		opts = append(opts, v1.WithLookbackDelta(p.maxAge))
	}
	val, _, _, err := p.api.Query(ctx, q, now, opts...)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return answer{}, fmt.Errorf("%s did not answer %q within %s", p.shown, oneLine(q), p.timeout)
		}
		return answer{}, fmt.Errorf("query %q on %s: %v", oneLine(q), p.shown, err)
	}
	if sites, ok, err := bySite(val); ok || err != nil {
		if err != nil {
			return answer{}, fmt.Errorf("query %q: %v", oneLine(q), err)
		}
		return answer{sites: sites}, nil
	}
	v, err := oneNumber(val)
	if err != nil {
		return answer{}, fmt.Errorf("query %q: %v", oneLine(q), err)
	}
	return answer{value: v}, nil
}

// oneNumber is the number of a query's answer: a scalar, or a vector of
// exactly one sample. A NaN or infinity is no number.
func oneNumber(val model.Value) (float64, error) {
	var v model.SampleValue
	switch r := val.(type) {
	case *model.Scalar:
		v = r.Value
	case model.Vector:
		switch len(r) {
		case 0:
			return 0, fmt.Errorf("no series (none recent enough, or the query matches nothing)")
		case 1:
			v = r[0].Value
		default:
			return 0, fmt.Errorf("%d series, want one number (aggregate them: max(…), sum(…))", len(r))
		}
	case nil:
		return 0, fmt.Errorf("no answer")
	default:
		return 0, fmt.Errorf("a %s, want a scalar or one series", val.Type())
	}
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v is not a number to compare", f)
	}
	return f, nil
}

// boundedTransport adds the credentials, read from their files at every
// request (so a rotated secret is used without a reload, and no secret is
// kept in the config or shown), to requests for the configured origin
// only, and cuts an answer at maxPrometheusAnswer.
type boundedTransport struct {
	next        http.RoundTripper
	origin      string // scheme://host:port of sensor.prometheus.url
	basicAuth   string // file of user:password
	bearerToken string // file of the token
}

// maxPrometheusRedirects is http.Client's own bound on a redirect chain.
const maxPrometheusRedirects = 10

// checkRedirect follows a redirect within the configured origin only: a
// redirect elsewhere (another host, port or scheme, https to http) would
// carry the request, and once the credentials, to someone else.
func (t *boundedTransport) checkRedirect(req *http.Request, via []*http.Request) error {
	if o := origin(req.URL); o != t.origin {
		return fmt.Errorf("refused the redirect to %s: it leaves %s (give sensor.prometheus.url the server's own address)", req.URL.Redacted(), t.origin)
	}
	if len(via) >= maxPrometheusRedirects {
		return fmt.Errorf("stopped after %d redirects", maxPrometheusRedirects)
	}
	return nil
}

// origin is a URL's scheme, host and port (the scheme's default when it
// names none), the unit browsers trust credentials to.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case origin(req.URL) != t.origin:
		// Unreachable through checkRedirect; kept so that no other path
		// can carry the credentials away.
	case t.basicAuth != "":
		user, pass, err := readCredentials(t.basicAuth, "basic_auth_file")
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.SetBasicAuth(user, pass)
	case t.bearerToken != "":
		token, _, err := readCredentials(t.bearerToken, "bearer_token_file")
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxPrometheusAnswer}
	return resp, nil
}

// readCredentials reads a credentials file: "user:password" for basic
// auth (user and password), or a token (in user). Its errors never quote
// the file.
func readCredentials(path, key string) (string, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("sensor.prometheus.%s: cannot read %s", key, path)
	}
	text := strings.TrimSpace(string(b))
	if key == "bearer_token_file" {
		if text == "" {
			return "", "", fmt.Errorf("sensor.prometheus.%s: %s is empty", key, path)
		}
		return text, "", nil
	}
	user, pass, ok := strings.Cut(text, ":")
	if !ok || user == "" {
		return "", "", fmt.Errorf("sensor.prometheus.%s: %s does not hold user:password", key, path)
	}
	return user, pass, nil
}

// limitedBody fails a read past its limit rather than truncate silently.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 && err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("answer larger than %d bytes: not one number", maxPrometheusAnswer)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

package sensor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// DefaultProbeTimeout is the probe's timeout when none is configured.
const DefaultProbeTimeout = 2 * time.Second

// Probe measures a URL's time to first byte: from sending the request,
// connection included, to the first byte of the response. A fresh
// connection each time, as a new visitor's, and no redirect followed.
type Probe struct {
	url     string
	shown   string // url without a password, for messages
	timeout time.Duration
	client  *http.Client
}

// NewProbe returns a probe of rawURL. timeout <= 0 means DefaultProbeTimeout.
func NewProbe(rawURL string, timeout time.Duration) (*Probe, error) {
	u, err := parseHTTPURL(rawURL, "probe URL", "http://host[:port]/path")
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	return &Probe{
		url:     u.String(),
		shown:   u.Redacted(),
		timeout: timeout,
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:              nil, // the backend is local; never an environment's proxy
				DisableKeepAlives:  true,
				DisableCompression: true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// Timeout returns the probe's timeout.
func (p *Probe) Timeout() time.Duration { return p.timeout }

// TTFB sends one request and returns its time to first byte. A response
// that has not begun within the timeout counts as the timeout, not as an
// error: a backend that slow is the figure. Any status counts: a 500 that
// comes fast is fast. Only a request that cannot be made (connection
// refused, a bad name) is an error. The body is not read.
func (p *Probe) TTFB(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var start time.Time
	var ttfb atomic.Int64 // set on the transport's goroutine
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { ttfb.Store(int64(time.Since(start))) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, p.url, nil)
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", p.shown, err)
	}
	req.Header.Set("User-Agent", "gearshift-probe")
	start = time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		var nerr net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) && nerr.Timeout() {
			return p.timeout, nil
		}
		return 0, fmt.Errorf("probe %s: %w", p.shown, err)
	}
	resp.Body.Close()
	if d := time.Duration(ttfb.Load()); d > 0 {
		return d, nil
	}
	return time.Since(start), nil
}

// BackendTTFBMs is the signal of the probe source.
const BackendTTFBMs = "backend_ttfb_ms"

// ProbeConfig is the `sensor.probe` block: a backend URL timed every poll.
type ProbeConfig struct {
	URL     string           `yaml:"url"`     // a backend URL whose time to first byte is backend_ttfb_ms; "": off
	Timeout timefmt.Duration `yaml:"timeout"` // a probe that takes longer counts as this
}

// maxProbeTimeout bounds the probe: the poll waits for it.
const maxProbeTimeout = 30 * time.Second

// probeWindow smooths the backend's time to first byte: one slow page is
// not a slow backend, ten seconds of them are.
const probeWindow = 10 * time.Second

var probeSource = Source{
	Name: "probe",
	Key:  "sensor.probe.url",
	Signals: []state.Signal{{
		Name: BackendTTFBMs, Backend: true, Unit: "ms", Direction: state.Rises, Precision: 0,
		Bound:      state.TTFBBound,
		Help:       "The backend probe's time to first byte, smoothed.",
		Metric:     "gearshift_backend_ttfb_seconds",
		Scale:      0.001,
		PerfUOM:    "ms",
		StatusLine: "backend ttfb",
	}},
	On: on(func(cfg HostConfig) string { return cfg.Sensor.Probe.URL }),
	Check: func(cfg HostConfig, problem func(key, format string, args ...any)) {
		p := cfg.Sensor.Probe
		if p.URL != "" {
			if _, err := NewProbe(p.URL, time.Duration(p.Timeout)); err != nil {
				problem("sensor.probe.url", "%v", err)
			}
		}
		if t := p.Timeout; t <= 0 || t > timefmt.Duration(maxProbeTimeout) {
			problem("sensor.probe.timeout", "must be positive and at most %s, got %s", timefmt.Duration(maxProbeTimeout), t)
		}
	},
	Open: func(cfg HostConfig) (Reader, error) {
		p, err := NewProbe(cfg.Sensor.Probe.URL, time.Duration(cfg.Sensor.Probe.Timeout))
		if err != nil {
			return nil, err
		}
		return &probeReader{probe: p, ttfb: state.EWMA{Window: probeWindow}}, nil
	},
}

// probeReader smooths the probe's times.
type probeReader struct {
	probe *Probe
	ttfb  state.EWMA
}

func (r *probeReader) Read(ctx context.Context) (func(*Sample), error) {
	d, err := r.probe.TTFB(ctx)
	if err != nil {
		r.ttfb.Reset()
		return nil, err
	}
	ms := r.ttfb.Update(time.Now(), float64(d)/float64(time.Millisecond))
	return func(s *Sample) { s.Values[BackendTTFBMs] = ms }, nil
}

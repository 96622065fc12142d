package sensor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"
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
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := rawURL
		if err == nil {
			shown = u.Redacted()
		}
		return nil, fmt.Errorf("probe URL %q: want http://host[:port]/path", shown)
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

package guest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// The plain headers of every check's fetch: a new visitor's browser, the
// same for every ask, so that no visitor's headers (a language, an
// address, a credential) decide a verdict kept for everyone.
const (
	checkUserAgent = "gearshift-guest-check"
	checkAccept    = "text/html,application/xhtml+xml,*/*;q=0.8"
)

// backendClient returns the client of the checks: it connects to backend
// whatever address a request names, through no proxy, and follows no
// redirect (a redirect is the backend's answer, compared as it is).
func backendClient(backend string, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			// Proxy is nil: an http_proxy in the daemon's environment
			// is not the backend.
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, "tcp", backend)
			},
			MaxIdleConnsPerHost: maxInFlight,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// fetch is one new visitor's request for the page r asks for: its path
// and query at the backend, its Host, and the fixed headers, nothing else
// of r's. Accept-Encoding is the client's to choose: Go's asks for gzip
// and compares (and shares) the page decoded.
func (s *Server) fetch(ctx context.Context, r *http.Request) (*http.Response, []byte, error) {
	u := &url.URL{
		Scheme:     "http",
		Host:       s.backend,
		Path:       r.URL.Path,
		RawPath:    r.URL.RawPath,
		RawQuery:   r.URL.RawQuery,
		ForceQuery: r.URL.ForceQuery,
	}
	h := http.Header{
		"User-Agent": {checkUserAgent},
		"Accept":     {checkAccept},
	}
	if p := forwardedProto(r); p != "" {
		h.Set("X-Forwarded-Proto", p)
	}
	req := (&http.Request{
		Method:     http.MethodGet,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       r.Host,
	}).WithContext(ctx)
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

// forwardedProto is the ask's X-Forwarded-Proto when it is exactly one
// of http and https, else "": a site behind a TLS terminator answers
// http with a redirect, and nothing else of the header is passed on.
func forwardedProto(r *http.Request) string {
	if vs := r.Header.Values("X-Forwarded-Proto"); len(vs) == 1 && (vs[0] == "http" || vs[0] == "https") {
		return vs[0]
	}
	return ""
}

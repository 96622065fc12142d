package sensor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNewProbe(t *testing.T) {
	tests := []struct {
		url, wantErr string
		timeout      time.Duration
		wantTimeout  time.Duration
	}{
		{url: "http://127.0.0.1:8080/", wantTimeout: DefaultProbeTimeout},
		{url: "https://www.example.com/health", timeout: 500 * time.Millisecond, wantTimeout: 500 * time.Millisecond},
		{url: "127.0.0.1:8080/", wantErr: `probe URL "127.0.0.1:8080/": want http://host[:port]/path`},
		{url: "file:///etc/passwd", wantErr: "want http://"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			p, err := NewProbe(tc.url, tc.timeout)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewProbe: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || p.Timeout() != tc.wantTimeout {
				t.Errorf("NewProbe = %+v, %v; want timeout %s", p, err, tc.wantTimeout)
			}
		})
	}
}

// TestProbeAgainstServer probes real HTTP servers on loopback. The delays
// are lower bounds the server enforces, so the assertions are ordering
// (ttfb >= delay), never an upper bound on a shared machine's speed.
func TestProbeAgainstServer(t *testing.T) {
	const delay = 150 * time.Millisecond
	bodyDone := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			time.Sleep(delay)
			w.Write([]byte("hello"))
		case "/stall":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		case "/endless":
			// Headers at once, then a body that never ends: the probe
			// must not wait for it.
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for {
				if _, err := w.Write(make([]byte, 64<<10)); err != nil {
					close(bodyDone)
					return
				}
			}
		case "/redirect":
			time.Sleep(delay)
			http.Redirect(w, r, "/stall", http.StatusFound)
		case "/error":
			http.Error(w, "database down", http.StatusInternalServerError)
		}
	}))
	defer slow.Close()
	ctx := context.Background()
	probe := func(path string, timeout time.Duration) (time.Duration, error) {
		t.Helper()
		p, err := NewProbe(slow.URL+path, timeout)
		if err != nil {
			t.Fatal(err)
		}
		return p.TTFB(ctx)
	}

	if d, err := probe("/slow", 5*time.Second); err != nil || d < delay {
		t.Errorf("TTFB(/slow) = %s, %v; want at least %s", d, err, delay)
	}
	if d, err := probe("/stall", 300*time.Millisecond); err != nil || d != 300*time.Millisecond {
		t.Errorf("TTFB(/stall) = %s, %v; want the timeout, 300ms, and no error", d, err)
	}
	if d, err := probe("/endless", 5*time.Second); err != nil || d <= 0 || d >= 5*time.Second {
		t.Errorf("TTFB(/endless) = %s, %v; want the headers' time", d, err)
	}
	select {
	case <-bodyDone:
	case <-time.After(5 * time.Second):
		t.Error("the probe kept the connection of an endless body open")
	}
	if d, err := probe("/redirect", 5*time.Second); err != nil || d < delay || d >= 5*time.Second {
		t.Errorf("TTFB(/redirect) = %s, %v; want the redirect's own time, not the stalling target's", d, err)
	}
	if d, err := probe("/error", 5*time.Second); err != nil || d <= 0 {
		t.Errorf("TTFB(/error) = %s, %v; want a time: a 500 is still an answer", d, err)
	}

	addr := slow.Listener.Addr().String()
	slow.Close()
	withPassword, _ := NewProbe("http://gearshift:s3cret@"+addr+"/", time.Second)
	if _, err := withPassword.TTFB(ctx); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("TTFB of a closed port with a password in the URL: error %v, want one without the password", err)
	}
	p, _ := NewProbe("http://"+addr+"/", time.Second)
	if d, err := p.TTFB(ctx); err == nil || !strings.Contains(err.Error(), "probe http://"+addr+"/") {
		t.Errorf("TTFB of a closed port = %s, %v; want an error naming the URL", d, err)
	}
}

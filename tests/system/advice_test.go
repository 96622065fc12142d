package system

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// When heavy does not keep requests off the backend, the daemon says why
// and which setting would change it, in check, status and the hooks: a
// case per kind of traffic that heavy cannot serve from the cache, through
// a real varnishd and the daemon with the default profiles.
func TestAdviceThroughCheck(t *testing.T) {
	// A PHP site's habits: pages under /shop set a plugin's cookie on
	// every answer; POST answers (xmlrpc.php); other pages are plain.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/shop") {
			// A form token per visitor: guest_pages finds these
			// pages private and does not share them.
			w.Header().Add("Set-Cookie", "plugin_visit=1; path=/")
			fmt.Fprintf(w, "<input name=token value=%d>\n", rand.Int64())
		}
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s\n", r.Method, r.URL)
	}))
	t.Cleanup(srv.Close)
	v := varnishtest.Start(t, varnishtest.Config{})
	hookOut := filepath.Join(t.TempDir(), "hook.env")
	path, cfg := configtest.ForVarnish(t, v, func(cfg *config.Config) {
		quietThresholds(cfg) // min_dwell 1s: advice after a second of a high share
		cfg.Backend = profiles.BackendAt("127.0.0.1", srv.Listener.Addr().(*net.TCPAddr).Port)
		cfg.Varnish.Targets[0].Name = v.WorkDir
		cfg.Hooks.OnChange = []string{"/bin/sh", "-c", `{ env | grep ^GEARSHIFT_ | sort; echo --; } >> ` + hookOut}
	})
	d := spawnDaemon(t, v, path)
	d.cfg = cfg
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(cfg.Log.File)
			t.Logf("the end of the daemon's log:\n%s", b[max(0, len(b)-6000):])
		}
	})
	t.Cleanup(func() {
		if d.running() {
			d.gs("stop")
		}
	})
	d.eventually("daemon in sync on light", 90*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		return inSync(s, "light")
	})
	if _, errOut, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}

	// New connections, as from many visitors: varnishd counts a
	// session's requests when it ends.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var n atomic.Int64
	cases := []struct {
		name string
		req  func(i int64) *http.Request
		want []string // in check's output
	}{
		{"a tracking cookie", func(i int64) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, v.URL("/news"), nil)
			r.Header.Set("Cookie", fmt.Sprintf("_my_tracker=%d", i))
			return r
		}, []string{"% session (cookie _my_tracker)", "profiles.ignore_cookies"}},
		{"a POST flood", func(i int64) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, v.URL("/xmlrpc.php"), strings.NewReader("<methodCall/>"))
			return r
		}, []string{"% method POST /xmlrpc.php", "rate-limit"}},
		{"a search crawl", func(i int64) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, v.URL(fmt.Sprintf("/?s=word%d", i)), nil)
			return r
		}, []string{"% miss GET /?s=*"}},
		{"Set-Cookie on every page", func(i int64) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, v.URL(fmt.Sprintf("/shop/item%d", i%20)), nil)
			return r
		}, []string{"% set_cookie (cookie plugin_visit)", "guest_pages already shares"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if resp, err := client.Do(tc.req(n.Add(1))); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			defer func() { close(stop); <-done }()
			var out string
			d.eventually("advice on "+tc.name, 60*time.Second, func() error {
				var code int
				out, _, code = d.gs("check")
				for _, w := range tc.want {
					if code != 1 || !strings.Contains(out, w) {
						return fmt.Errorf("check: exit %d, %q; want WARNING with %q", code, out, w)
					}
				}
				return nil
			})
			if !strings.Contains(out, "heavy for ") || !strings.Contains(out, "of requests reach the backend: ") {
				t.Errorf("check's advice: %s", out)
			}
			if s, err := d.status(); err != nil || !strings.Contains(s.Advice, tc.want[0]) {
				t.Errorf("status advice %q, %v; want %q", s.Advice, err, tc.want[0])
			}
		})
	}
	// The way back to light: the hook learns the incident's last advice.
	if _, errOut, code := d.gs("auto"); code != 0 {
		t.Fatalf("auto: exit %d: %s", code, errOut)
	}
	d.eventually("the hook back to light", 60*time.Second, func() error {
		b, _ := os.ReadFile(hookOut)
		runs := strings.Split(strings.TrimSuffix(string(b), "--\n"), "--\n")
		last := runs[len(runs)-1]
		if !strings.Contains(last, "GEARSHIFT_TO=light") {
			return fmt.Errorf("hooks so far:\n%s", b)
		}
		if !strings.Contains(last, "GEARSHIFT_ADVICE=heavy for ") || !strings.Contains(last, "set_cookie") {
			return fmt.Errorf("the step back to light's hook has no advice:\n%s", last)
		}
		return nil
	})
}

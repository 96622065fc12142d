package top

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// site stands in for a PHP site: pages under /shop set a cookie on every
// answer (a plugin's), everything else is a plain page without caching
// headers; POST answers too (xmlrpc.php).
func site(tb testing.TB) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/shop") {
			w.Header().Add("Set-Cookie", "plugin_visit=1; path=/")
		}
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s\n", r.Method, r.URL)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// StartSite starts a varnishd in front of site with gearshift's default
// profiles loaded, heavy in use, and returns it; use switches the gear.
func startSite(tb testing.TB) (v *varnishtest.Varnish, use func(state.Gear)) {
	tb.Helper()
	testenv.Need(tb, "varnishlog", "varnish")
	srv := site(tb)
	s := profiles.Site{Options: profiles.DefaultOptions(), Backend: profiles.BackendAt("127.0.0.1", srv.Listener.Addr().(*net.TCPAddr).Port)}
	v = varnishtest.Start(tb, varnishtest.Config{})
	for _, g := range state.All {
		text, err := profiles.Render(s, g)
		if err != nil {
			tb.Fatal(err)
		}
		file := filepath.Join(v.Dir, g.String()+".vcl")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
		if out, err := v.Adm("vcl.load", g.String(), file); err != nil {
			tb.Fatalf("load %s: %v\n%s", g, err, out)
		}
	}
	use = func(g state.Gear) {
		tb.Helper()
		if out, err := v.Adm("vcl.use", g.String()); err != nil {
			tb.Fatalf("use %s: %v\n%s", g, err, out)
		}
	}
	use(state.Heavy)
	return v, use
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// drive sends requests made by next (i counts from 0) for d, from a few
// clients at once.
func drive(tb testing.TB, v *varnishtest.Varnish, d time.Duration, next func(i int) *http.Request) {
	tb.Helper()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				i := n
				n++
				mu.Unlock()
				r := next(i)
				u := v.URL(r.URL.RequestURI())
				r.URL, _ = r.URL.Parse(u)
				r.Host = ""
				resp, err := client.Do(r)
				if err != nil {
					tb.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

func request(tb testing.TB, method, path, cookie string) *http.Request {
	r, err := http.NewRequest(method, "http://varnish"+path, strings.NewReader(""))
	if err != nil {
		tb.Fatal(err)
	}
	if cookie != "" {
		r.Header.Set("Cookie", cookie)
	}
	return r
}

// TestReasonsFromVarnish drives a demo site's surges through a real
// varnishd with gearshift's profiles and checks that Snapshot names the
// reason each one reaches the backend for, and its key.
func TestReasonsFromVarnish(t *testing.T) {
	v, use := startSite(t)
	for _, tc := range []struct {
		name    string
		gear    state.Gear
		next    func(i int) *http.Request
		reason  string
		cookie  string // the top reason's cookie
		request string // the top reason's method and URL
	}{
		{"tracking cookie", state.Heavy, func(i int) *http.Request {
			// Every visitor has a cookie of its own: each is a session.
			return request(t, "GET", fmt.Sprintf("/post/%d", i%3), fmt.Sprintf("_ga=GA1.1; _my_tracker=v%d", i))
		}, "session", "_my_tracker", ""},
		{"POST flood", state.Heavy, func(i int) *http.Request {
			if i%4 == 0 {
				return request(t, "GET", "/", "")
			}
			return request(t, "POST", "/xmlrpc.php", "")
		}, "method", "", "POST /xmlrpc.php"},
		{"search crawl", state.Heavy, func(i int) *http.Request {
			return request(t, "GET", fmt.Sprintf("/?s=word%d", i), "")
		}, "miss", "", "GET /?s=*"},
		{"Set-Cookie on every page", state.Heavy, func(i int) *http.Request {
			return request(t, "GET", fmt.Sprintf("/shop/item%d", i%5), "")
		}, "set_cookie", "plugin_visit", ""},
		{"light", state.Light, func(i int) *http.Request {
			return request(t, "GET", fmt.Sprintf("/post/%d", i%3), "")
		}, "light", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			use(tc.gear)
			var s Summary
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				s, err = Snapshot(context.Background(), v.WorkDir, 2500*time.Millisecond)
			}()
			time.Sleep(300 * time.Millisecond) // varnishlog attaches
			drive(t, v, 1500*time.Millisecond, tc.next)
			<-done
			if err != nil {
				t.Fatal(err)
			}
			top, ok := s.Top()
			if !ok || top.Reason != tc.reason || top.Share < 0.5 {
				t.Fatalf("top reason = %+v, want %s with most requests; all: %v", top, tc.reason, s.Reasons)
			}
			if tc.cookie != "" && top.Cookie != tc.cookie {
				t.Errorf("top cookie = %q, want %q", top.Cookie, tc.cookie)
			}
			if tc.request != "" && top.Request != tc.request {
				t.Errorf("top request = %q, want %q", top.Request, tc.request)
			}
			t.Logf("%.1f backend requests/s: %s", s.Rate, top)
		})
	}
}

// TestEveryFetchHasOneReason checks the profiles' promise: every backend
// request of every gear carries exactly one reason word from the list.
func TestEveryFetchHasOneReason(t *testing.T) {
	v, use := startSite(t)
	common := []string{"method", "never_cache", "static_miss"}
	want := map[state.Gear][]string{
		state.Light:    append(common, "light"),
		state.Moderate: append(common, "session", "set_cookie", "miss"),
		state.Heavy:    append(common, "session", "set_cookie", "miss"),
	}
	for _, g := range state.All {
		t.Run(g.String(), func(t *testing.T) {
			use(g)
			var logged []Request
			done := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				done <- Log{Name: v.WorkDir}.Watch(ctx, func(q Request) { logged = append(logged, q) })
			}()
			time.Sleep(300 * time.Millisecond)
			// Paths of their own: the gears share one cache.
			n := g.String()
			paths := []string{"/" + n, "/" + n + ".css", "/shop/" + n, "/wp-admin/" + n, "/?s=" + n, "/post/" + n}
			for _, p := range paths {
				for _, m := range []string{"GET", "POST"} {
					drive(t, v, 10*time.Millisecond, func(int) *http.Request { return request(t, m, p, "PHPSESSID=abc") })
					drive(t, v, 10*time.Millisecond, func(int) *http.Request { return request(t, m, p, "") })
				}
			}
			time.Sleep(500 * time.Millisecond)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if len(logged) == 0 {
				t.Fatal("no backend request seen")
			}
			seen := map[string]bool{}
			for _, q := range logged {
				if _, ok := profiles.LookupReason(q.Reason); !ok || q.reasons != 1 {
					t.Errorf("%s %s: %d reason records, the first %q %q; want one reason word", q.Method, q.URL, q.reasons, q.Reason, q.Detail)
				}
				seen[q.Reason] = true
			}
			for _, w := range want[g] {
				if !seen[w] {
					t.Errorf("no fetch said %s; seen %v", w, seen)
				}
			}
		})
	}
}

// TestOverBudgetFromVarnish: a client past its budget (the default
// profiles.client_budget) shows up as reason over_budget, by its address,
// though its refused requests never reached the backend.
func TestOverBudgetFromVarnish(t *testing.T) {
	v, _ := startSite(t) // heavy
	from := clientFrom("127.0.0.2")
	var s Summary
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, err = Snapshot(context.Background(), v.WorkDir, 3*time.Second)
	}()
	time.Sleep(300 * time.Millisecond) // varnishlog attaches
	refused := 0
	for i := range 300 {
		resp, err := from.Post(v.URL(fmt.Sprintf("/xmlrpc.php?n=%d", i)), "text/xml", strings.NewReader("<x/>"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if refused < 150 {
		t.Fatalf("%d of 300 POSTs refused: the budget (%v) did not hold", refused, profiles.DefaultBudget)
	}
	top, ok := s.Top()
	if !ok || top.Reason != OverBudget || top.Count < refused*9/10 {
		t.Fatalf("top reason = %+v, want over_budget for about %d requests; all: %v", top, refused, s.Reasons)
	}
}

// clientFrom is an HTTP client whose connections come from ip, a loopback
// address outside purge_acl: a visitor with a budget.
func clientFrom(ip string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
	}}
}

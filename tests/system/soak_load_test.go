//go:build soak

package system

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// waitVarnish waits until varnishd answers HTTP again (its manager
// restarts a killed child).
func (s *soak) waitVarnish(d time.Duration) {
	lampstack.WaitFor(d, func() bool {
		resp, err := http.Get(s.v.URL("/style.css"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// drive moves the injected value through gearCycle, a step every 1.5 s.
func (s *soak) drive(ctx context.Context) {
	tick := time.NewTicker(soakStep)
	defer tick.Stop()
	for i := 0; ; i++ {
		os.WriteFile(s.inject, []byte(gearCycle[i%len(gearCycle)]+"\n"), 0o644)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// watchVarnish reads vcl.list and the child's status every 50 ms on an
// admin connection of its own: what Varnish runs, whatever the daemon
// says.
func (s *soak) watchVarnish(ctx context.Context) {
	var c *varnishadm.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	tick := time.NewTicker(soakWatchIv)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c == nil {
			c, _ = varnishadm.NewFromFile(s.v.AdminAddr, s.v.SecretFile)
		}
		sample := vclSample{at: time.Now()}
		if c != nil {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			vcls, err := c.VCLList(lctx)
			cancel()
			if err != nil {
				c.Close()
				c = nil
			} else {
				// A manager whose cache child is restarting (killed)
				// answers vcl.list but not vcl.use: reachable once the
				// child runs.
				lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				st, err := c.Run(lctx, "status")
				cancel()
				sample.ok = err == nil && strings.Contains(st, "running")
				for _, v := range vcls {
					if v.IsLabel() {
						continue
					}
					sample.loaded++
					gear := gearOfVCL(v.Name)
					if gear != "" {
						sample.ours++
					}
					if v.Active() {
						sample.active = gear
					}
				}
			}
		}
		s.mu.Lock()
		s.watch = append(s.watch, sample)
		s.mu.Unlock()
	}
}

// gearOfVCL is the gear of one of gearshift's VCL names
// (gearshift-<gear>-<hash>), or "".
func gearOfVCL(name string) string {
	for _, g := range []string{"light", "moderate", "heavy"} {
		if strings.HasPrefix(name, "gearshift-"+g+"-") {
			return g
		}
	}
	return ""
}

// anonymous asks for pages and a static file through Varnish, as
// visitors do: each request a visitor's of the crowd (surgeMix's
// addresses), in X-Forwarded-For, as a terminator on the host (a trusted
// proxy) would send it, so that Varnish knows each visitor for who it is
// (front_door forwarded, not unidentified).
func (s *soak) anonymous(ctx context.Context) {
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		path := []string{"/", "/style.css", "/login.php"}[i%3]
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.v.URL(path), nil)
		req.Header.Set("X-Forwarded-For", crowdAddr(s.visitors.Add(1)-1))
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err != nil || resp.StatusCode != 200 {
			s.traffic.errors.Add(1)
		} else {
			s.traffic.pages.Add(1)
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// signedIn signs alice in and saves a preference every half second,
// checking each answer is her page with what she saved: a page for
// nobody is a lost session (a drop), a refused connection (varnishd
// restarting) an error. She comes from an address of her own, in
// X-Forwarded-For (as anonymous' visitors do).
func (s *soak) signedIn(ctx context.Context) {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Timeout: 5 * time.Second, Jar: jar, Transport: forwardedFor(userAddr(0))}
	get := func(path string, form url.Values) (string, string, bool) {
		var resp *http.Response
		var err error
		if form == nil {
			resp, err = client.Get(s.v.URL(path))
		} else {
			resp, err = client.PostForm(s.v.URL(path), form)
		}
		if err != nil {
			return "", "", false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Request.URL.Path, resp.StatusCode == 200
	}
	signedIn := false
	colours := []string{"blue", "green", "orange"}
	for i := 0; ctx.Err() == nil; i++ {
		sleepCtx(ctx, 500*time.Millisecond)
		if !signedIn {
			body, _, ok := get("/login.php", nil)
			m := csrfRE.FindStringSubmatch(body)
			if !ok || m == nil {
				s.traffic.errors.Add(1)
				continue
			}
			body, at, ok := get("/login.php", url.Values{"csrf": {m[1]}, "name": {"alice"}, "password": {s.password}})
			if !ok || at != "/account.php" {
				s.traffic.errors.Add(1)
				continue
			}
			s.traffic.logins.Add(1)
			signedIn = true
		}
		body, at, ok := get("/prefs.php", nil)
		if !ok {
			s.traffic.errors.Add(1)
			continue
		}
		m := csrfRE.FindStringSubmatch(body)
		if at == "/login.php" || m == nil {
			s.traffic.drops.Add(1)
			signedIn = false
			continue
		}
		colour := colours[i%len(colours)]
		body, at, ok = get("/prefs.php", url.Values{"csrf": {m[1]}, "colour": {colour}})
		switch {
		case !ok:
			s.traffic.errors.Add(1)
		case at == "/login.php":
			s.traffic.drops.Add(1)
			signedIn = false
		case strings.Contains(body, `value="`+colour+`" selected`):
			s.traffic.writes.Add(1)
		default:
			s.traffic.errors.Add(1)
		}
	}
}

// forwardedFor is a transport that sends every request with an
// X-Forwarded-For of addr (a redirect's too, as the terminator would).
func forwardedFor(addr string) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Forwarded-For", addr)
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// sampleEvery records the daemon's and Varnish's figures every 10 s.
func (s *soak) sampleEvery(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(soakSampleIv)
	defer tick.Stop()
	for {
		s.sample()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *soak) sample() {
	sm := soakSample{at: time.Now(), rss: -1, gor: -1, fds: -1, vcls: -1, bans: -1, history: -1, uptime: -1}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid)); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				sm.rss = kb * 1024
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.pid)); err == nil {
		sm.fds = float64(len(fds))
	}
	if v, ok := scrapeMetric("http://"+s.cfg.MetricsListen+"/metrics", "go_goroutines"); ok {
		sm.gor = v
	}
	if out, err := exec.Command("varnishstat", "-n", s.v.WorkDir, "-1", "-f", "MAIN.bans").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) >= 2 && f[0] == "MAIN.bans" {
			sm.bans, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	s.mu.Lock()
	if n := len(s.watch); n > 0 && s.watch[n-1].ok {
		sm.vcls = float64(s.watch[n-1].loaded)
	}
	s.mu.Unlock()
	sm.history = float64(dirBytes(s.cfg.History.Dir))
	if st, err := s.d.status(); err == nil {
		sm.uptime = st.UptimeSeconds
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

func scrapeMetric(u, name string) (float64, bool) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

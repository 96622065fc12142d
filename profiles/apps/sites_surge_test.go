//go:build sitessurge

package apps

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/profiles"
)

// TestSitesSurge: the stack of TestSites (Debian's WordPress, MediaWiki
// and the session site as name-based virtual hosts of one Apache behind
// one varnishd) run by `gearshift run` with the default config plus the
// three sites, as an operator runs it. An open-loop surge on the blog
// (10 × what Apache alone serves of it, half the clicks with a unique
// fbclid) puts the blog, and only it, in heavy: the wiki, the session
// site and the default site stay light all through, their visitors are
// served, and their signed-in users see their own writes in the middle of
// the surge. It needs the machine to itself (the gears follow its load),
// so it runs in the longer CI stage (make test-long: make sites-surge,
// build tag sitessurge; about 2 minutes).
func TestSitesSurge(t *testing.T) {
	bin := lampstack.Need(t, lampstack.WordPressPackages+", mediawiki, php-intl, php-mbstring, php-xml, varnish, varnish-modules",
		slices.Concat(lampstack.WordPressPrograms, []string{"/usr/share/mediawiki/maintenance/install.php", "varnishd"})...)
	s := startSites(t, bin)
	// What Apache alone serves of the blog, measured before the daemon
	// runs: the machine's load from it is no surge through Varnish.
	capacity := s.blogCapacity(t)
	rate := max(50, int(10*capacity))
	t.Logf("Apache alone serves %.1f req/s of %s; the surge offers %d req/s; load average %.2f", capacity, blogHost, rate, loadavg())
	quiet(t, 2*time.Minute)
	d := startGearshift(t, s)

	gears := d.follow(t)
	const lead, surge = 10 * time.Second, 40 * time.Second
	// The neighbours' visitors first (the backend's requests by site are
	// known when the surge comes), and all along.
	var neighbours []*attack
	for host, pages := range map[string][]string{wikiHost: {wikiPath(wikiPage)}, membersHost: {"/"}, otherHost: {"/"}} {
		neighbours = append(neighbours, s.attack(host, pages, 2, lead+surge))
	}
	time.Sleep(lead)
	blog := s.attack(blogHost, append([]string{"/"}, s.wp.Posts[blogHost]...), rate, surge)
	testenv.Eventually(t, blogHost+" above light", surge, func() bool { return gears.heaviest("blog") != "light" })
	// In the middle of the surge, the neighbours' signed-in users write
	// and read their writes back, served by light.
	s.wikiEdit(t)
	s.sessionNote(t)
	blog.wait()
	for _, a := range neighbours {
		a.wait()
	}
	gears.stop()

	for _, site := range []string{"wiki", "members", "default"} {
		if g := gears.heaviest(site); g != "light" {
			t.Errorf("site %s reached %s during %s's surge, want light all through (its gears, a letter every 0.5 s: %s)", site, g, blogHost, gears.trail(site))
		}
	}
	// The machine's gear is what the load called for (heavy on a machine
	// the surge saturates, moderate when moderate's copies already hold
	// it): the blog took it.
	if g, server := gears.heaviest("blog"), gears.heaviest(serverGear); g != server || g == "light" {
		t.Errorf("site blog reached %s, the server %s: want the blog in the server's gear, above light (blog: %s)", g, server, gears.trail("blog"))
	}
	t.Logf("blog reached %s (its gears, a letter every 0.5 s: %s)", gears.heaviest("blog"), gears.trail("blog"))
	for _, a := range neighbours {
		if a.ok != a.sent || a.sent == 0 {
			t.Errorf("%s: %d of %d anonymous requests answered 200 within 5 s during the surge (%s), want every one", a.host, a.ok, a.sent, a.failures())
		}
		if a.notLight > 0 {
			t.Errorf("%s: %d answers made by another gear's profile than light", a.host, a.notLight)
		}
	}
	t.Logf("%s: %d of %d requests answered 200 within 5 s; the neighbours': every one of %d", blogHost, blog.ok, blog.sent, neighbours[0].sent+neighbours[1].sent+neighbours[2].sent)
}

// daemon is a `gearshift run` of the test's own.
type daemon struct {
	cmd  *exec.Cmd
	sock string
	log  string
}

// startGearshift builds gearshift, starts `gearshift run` on s's varnishd
// with the default config plus the sites of TestSites (its target with
// the instance's name, the backend with Apache's 16 workers as its
// max_connections, its own files), and waits until every site is light
// in Varnish.
func startGearshift(t *testing.T, s *sitesStack) *daemon {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, "gearshift")
	build := exec.Command("go", "build", "-o", exe, "github.com/gearshift/gearshift/cmd/gearshift")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	path, cfg := configtest.ForVarnish(t, s.v, func(cfg *config.Config) {
		cfg.Backend = profiles.BackendAt("127.0.0.1", s.wp.Apache.Port)
		cfg.Backend.MaxConnections = 16
		cfg.PollInterval = config.Default().PollInterval
		cfg.Varnish.Targets[0].Name = s.v.WorkDir
		cfg.Sites = []config.Site{{Name: "blog", Hosts: []string{blogHost}}, {Name: "wiki", Hosts: []string{wikiHost}},
			{Name: "members", Hosts: []string{membersHost}}}
	})
	d := &daemon{sock: cfg.Control.Socket, log: filepath.Join(dir, "run.log")}
	out, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(exe, "run", "--config", path)
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	testenv.DiesWithTest(d.cmd)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { d.cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			d.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("gearshift run's output, last lines:\n%s", lampstack.LastLines(d.log, 40))
		}
	})
	c := api.NewClient(d.sock)
	testenv.Eventually(t, "gearshift in sync, every site light", 2*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := c.Status(ctx)
		return err == nil && st.State == "light" && len(st.Targets) == 1 && st.Targets[0].InSync &&
			strings.HasPrefix(st.Targets[0].ActiveVCL, "gearshift-router-") && len(st.Sites) == 4
	})
	return d
}

// serverGear is the key of the server's own gear (status state) among
// the sites' in siteGears.
const serverGear = "(server)"

// siteGears are the sites' gears as the daemon's status gave them, twice
// a second.
type siteGears struct {
	mu    sync.Mutex
	seen  map[string][]string // site -> its gear at each look
	done  chan struct{}
	ended sync.WaitGroup
}

func (d *daemon) follow(t *testing.T) *siteGears {
	g := &siteGears{seen: map[string][]string{}, done: make(chan struct{})}
	c := api.NewClient(d.sock)
	g.ended.Add(1)
	go func() {
		defer g.ended.Done()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := c.Status(ctx)
			cancel()
			if err == nil {
				g.mu.Lock()
				for _, site := range st.Sites {
					g.seen[site.Name] = append(g.seen[site.Name], site.Gear)
				}
				g.seen[serverGear] = append(g.seen[serverGear], st.State)
				g.mu.Unlock()
			}
			select {
			case <-g.done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-g.done:
		default:
			g.stop()
		}
	})
	return g
}

func (g *siteGears) stop() { close(g.done); g.ended.Wait() }

func (g *siteGears) reached(site, gear string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Contains(g.seen[site], gear)
}

// heaviest is the heaviest gear site was seen in ("" when never seen).
func (g *siteGears) heaviest(site string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	order := []string{"light", "moderate", "heavy"}
	best := -1
	for _, s := range g.seen[site] {
		best = max(best, slices.Index(order, s))
	}
	if best < 0 {
		return ""
	}
	return order[best]
}

// trail is site's gears, one letter a look.
func (g *siteGears) trail(site string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, s := range g.seen[site] {
		b.WriteByte(s[0])
	}
	return b.String()
}

// blogCapacity is what Apache alone serves of the blog's front page and
// posts: 200s a second in a closed loop of its 16 workers for 3 s.
func (s *sitesStack) blogCapacity(t *testing.T) float64 {
	t.Helper()
	pages := append([]string{"/"}, s.wp.Posts[blogHost]...)
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Second)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", s.wp.Apache.Port, pages[rand.IntN(len(pages))]), nil)
				req.Host = blogHost
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if ok == 0 {
		t.Fatalf("Apache answered no request for %s with a 200", blogHost)
	}
	return float64(ok) / 3
}

// attack is an open-loop load on one host through Varnish: anonymous
// visitors at a constant rate on its pages (half with a unique fbclid),
// whatever the server does.
type attack struct {
	host  string
	pages []string
	done  chan struct{}

	mu                 sync.Mutex
	sent, ok, notLight int            // notLight: 200s another gear's profile made
	codes              map[string]int // the failures by status, or "no answer"
}

func (s *sitesStack) attack(host string, pages []string, rate int, d time.Duration) *attack {
	a := &attack{host: host, codes: map[string]int{}, done: make(chan struct{}), pages: pages}
	targeter := func(tg *vegeta.Target) error {
		u := "http://" + s.v.HTTPAddr + a.pages[rand.IntN(len(a.pages))]
		if rand.IntN(2) == 0 {
			u += fmt.Sprintf("?fbclid=IwAR%x", rand.Uint64())
		}
		// Each visitor as the terminator in front would name it.
		xff := fmt.Sprintf("203.0.%d.%d", rand.IntN(256), 1+rand.IntN(254))
		*tg = vegeta.Target{Method: http.MethodGet, URL: u, Header: http.Header{"Host": {host}, "X-Forwarded-For": {xff}}}
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.Timeout(5*time.Second), vegeta.Redirects(vegeta.NoFollow), vegeta.MaxBody(0), vegeta.Workers(8))
	res := attacker.Attack(targeter, vegeta.ConstantPacer{Freq: rate, Per: time.Second}, d, host)
	go func() {
		defer close(a.done)
		for r := range res {
			a.mu.Lock()
			a.sent++
			switch {
			case r.Code == http.StatusOK:
				a.ok++
				if p := r.Headers.Get("X-Gearshift-Profile"); p != "light" {
					a.notLight++
				}
			case r.Code == 0:
				a.codes["no answer"]++
			default:
				a.codes[fmt.Sprint(r.Code)]++
			}
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *attack) wait() { <-a.done }

func (a *attack) failures() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprint(a.codes)
}

func loadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

// quiet waits, up to d, until the load average is under half a CPU per
// CPU: the gears follow the machine's load.
func quiet(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for loadavg()/float64(runtime.NumCPU()) >= 0.5 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
	}
	t.Logf("load average %.2f", loadavg())
}

package system

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkSites is one site's surge among neighbours (make bench-sites,
// docs/sites.md): Debian's WordPress serving three sites as name-based
// virtual hosts of one Apache behind one varnishd. What Apache alone
// serves of the surging site (C) is measured first; then the
// neighbours' steady traffic alone (their quiet p99); then the same load
// twice, side by side, each on a fresh cache and a fresh daemon in auto
// with the default config: with 0.4's single gear (no sites key) and
// with a sites entry for each. The load: SURGE_FACTOR × C anonymous
// requests/s on the surging site with the click-parameter mix and its
// logged-in users, while each neighbour has steady anonymous visitors
// and logged-in users. The report goes to SITES_OUT (markdown) with its
// chart beside it.
//
//	go test -run '^$' -bench '^BenchmarkSites$' -benchtime 1x -timeout 40m ./tests/system
func BenchmarkSites(b *testing.B) {
	k := surgeKnobsFromEnv(b)
	k.out = os.Getenv("SITES_OUT")
	if k.out == "" {
		k.out = "/tmp/gearshift-bench-sites/sites.md"
	}
	sb := startSitesBench(b)
	for range b.N {
		rep := &sitesReport{knobs: k, loadBefore: surgeLoadavg(), cpus: runtime.NumCPU(), started: time.Now()}
		rep.capacity = sb.capacity(b, k.capacityFor)
		rep.rate = max(1, int(rep.capacity*k.factor+0.5))
		b.Logf("sites: Apache alone serves %.1f req/s of %s; the surge offers %d req/s", rep.capacity, shopHost, rep.rate)

		if os.Getenv("SITES_RUNS") == "sites" {
			// While developing: the sites run alone, its first seconds logged, no report.
			sb.settle(b, k.settle)
			sb.sitesRun(b, "sites", true, k, rep.rate)
			continue
		}
		sb.settle(b, k.settle)
		rep.quiet = sb.quietRun(b, k)
		rep.settled = sb.settle(b, k.settle)
		withSites := sb.sitesRun(b, "sites", true, k, rep.rate)
		sb.settle(b, k.settle)
		single := sb.sitesRun(b, "single", false, k, rep.rate)
		rep.runs = []*sitesRun{single, withSites}
		rep.maxConnections = sb.maxConnections
		rep.elapsed = time.Since(rep.started)
		rep.write(b, k.out)
		for _, r := range rep.runs {
			s := r.summary()
			b.ReportMetric(s.neighbourOK*100, r.name+"-neighbours-ok-%")
			b.ReportMetric(s.shop.anonOK*100, r.name+"-surging-anon-ok-%")
		}
		b.ReportMetric(0, "ns/op")
	}
}

// The bench's three sites: shop surges, blog and news are its neighbours.
const (
	shopHost = "shop.example"
	blogHost = "blog.example"
	newsHost = "news.example"
)

var sitesBenchHosts = []string{shopHost, blogHost, newsHost}

// The neighbours' steady traffic, each: anonymous requests a second, and
// logged-in users at 1 request/s each.
const (
	neighbourRate  = 3
	neighbourUsers = 3
)

// sitesBench is the surge stack with three WordPress sites: its mix and
// cookies are the surging site's; each neighbour has its own.
type sitesBench struct {
	*surgeStack
	dwp       *lampstack.DebianWordPress
	mixes     map[string]*surgeMix // host -> its mix through Varnish
	logins    map[string][]string  // host -> its logged-in users' Cookie headers
	withSites bool                 // the next daemon's config has a sites key
}

// startSitesBench starts MariaDB, Debian's WordPress with the three
// sites (surgePosts posts, surgeUsers subscribers each) on one Apache
// (prefork, mod_php), and a varnishd; it logs the users in.
func startSitesBench(tb testing.TB) *sitesBench {
	tb.Helper()
	bin := lampstack.Need(tb, lampstack.WordPressPackages+", varnish-modules", lampstack.WordPressPrograms...)
	v := varnishtest.Start(tb, varnishtest.Config{})
	start := time.Now()
	var sites []lampstack.DebianSite
	for _, h := range sitesBenchHosts {
		sites = append(sites, lampstack.DebianSite{Host: h, URL: "http://" + h})
	}
	wp := lampstack.StartDebianWordPress(tb, tb.TempDir(), sites,
		lampstack.WordPressOptions{Posts: surgePosts, Subscribers: surgeUsers, Stack: lampstack.ModPHP}, bin)
	tb.Logf("sites: MariaDB, WordPress (%d sites) and Apache up in %s", len(sites), time.Since(start).Round(time.Millisecond))
	port, _ := strconv.Atoi(wp.Backend[strings.LastIndexByte(wp.Backend, ':')+1:])
	sb := &sitesBench{dwp: wp, mixes: map[string]*surgeMix{}, logins: map[string][]string{}}
	for _, h := range sitesBenchHosts {
		sb.mixes[h] = newSurgeMix("http://"+v.HTTPAddr, h, wp.Posts[h])
		// Logged in at Apache itself: the cookies are the site's
		// whichever way a request comes.
		direct := lampstack.Net{Resolve: map[string]string{h + ":80": wp.Backend}}
		users := surgeUsers
		if h != shopHost {
			users = users[:neighbourUsers]
		}
		for _, u := range users {
			sb.logins[h] = append(sb.logins[h], lampstack.Login(lampstack.NewVisitor(tb, "http://"+h, "127.0.0.1", direct), u, wp.Password))
		}
	}
	sb.surgeStack = &surgeStack{php: lampstack.ModPHP, v: v, bin: bin, mix: sb.mixes[shopHost],
		backend: profiles.BackendAt("127.0.0.1", port), apache: wp.Apache, cookies: sb.logins[shopHost]}
	tb.Cleanup(sb.stopDaemon)
	return sb
}

// freshDaemon gives the next run an empty cache and a new daemon in auto
// with the default config (its target, with the instance's name so that
// it reads Varnish's log, backend, files, backend.max_connections), with
// a site for each host when withSites; it waits until Varnish runs it.
func (sb *sitesBench) freshDaemon(tb testing.TB) *runningDaemon {
	tb.Helper()
	sb.stopDaemon()
	sb.v.Restart()
	path, cfg := configtest.ForVarnish(tb, sb.v, func(cfg *config.Config) {
		cfg.Backend.Host, cfg.Backend.Port = sb.backend.Host, sb.backend.Port
		cfg.PollInterval = config.Default().PollInterval
		cfg.Varnish.Targets[0].Name = sb.v.WorkDir
		if sb.withSites {
			for _, h := range sitesBenchHosts {
				cfg.Sites = append(cfg.Sites, config.Site{Name: strings.TrimSuffix(h, ".example"), Hosts: []string{h}})
			}
		}
	})
	sb.maxConnections = setMaxConnections(tb, path, apacheWorkers)
	d := spawnDaemon(tb, sb.v, path, "NOTIFY_SOCKET=")
	d.cfg = cfg
	sb.daemon = d
	d.eventually("daemon in sync, every site light", 2*time.Minute, func() error {
		s, err := d.status()
		switch {
		case err != nil:
			return err
		case s.State != "light" || len(s.Targets) != 1 || !s.Targets[0].InSync:
			return fmt.Errorf("state %s, targets %+v", s.State, s.Targets)
		case sb.withSites && len(s.Sites) != len(sitesBenchHosts)+1:
			return fmt.Errorf("sites %+v, want the three and default", s.Sites)
		}
		return nil
	})
	return d
}

// sitesRun is one run's record: the surging site's as a surge run, each
// neighbour's hits, and the gear each host was served in.
type sitesRun struct {
	name       string
	shop       *surgeRun
	neighbours map[string][]hit // host -> its hits
	gears      []hostGears
}

// hostGears is each host's gear as the daemon's status said it.
type hostGears struct {
	at    time.Duration
	gears map[string]string // host -> gear
}

// quietRun is the neighbours' traffic alone for SURGE_QUIET plus 10 s,
// with the sites daemon: their quiet latencies.
func (sb *sitesBench) quietRun(tb testing.TB, k surgeKnobs) *sitesRun {
	tb.Helper()
	sb.withSites = true
	sb.freshDaemon(tb)
	r := &sitesRun{name: "quiet", neighbours: map[string][]hit{}}
	sb.neighbourLoad(tb, r, time.Now(), k.quiet+10*time.Second)()
	return r
}

// sitesRun runs the quiet trickle and the surge on the surging site and
// the neighbours' steady traffic all along, on a fresh cache and daemon,
// with or without sites.
func (sb *sitesBench) sitesRun(tb testing.TB, name string, sites bool, k surgeKnobs, rate int) *sitesRun {
	tb.Helper()
	sb.withSites = sites
	sb.freshDaemon(tb)
	tb.Logf("sites: run %s: %s of %d req/s on %s, then %s of %d req/s; load average %.2f", name, k.quiet, k.quietRate, shopHost, k.surge, rate, surgeLoadavg())
	r := &sitesRun{name: name, neighbours: map[string][]hit{},
		shop: &surgeRun{name: name, surgeAt: k.quiet, surgeEnd: k.quiet + k.surge, loadStart: surgeLoadavg()}}
	shop := newLoad(sb.mix, nil)
	r.shop.mon = sb.watch(tb, shop.start)
	stopGears := sb.followGears(r, shop.start)
	anon := phasePacer{{k.quietRate, k.quiet}, {rate, k.surge}}
	shop.attack(shop.attacker(32, 0), sb.mix.anonymous(), anon, anon.total(), false)
	shop.attack(shop.attacker(32, 0), sb.mix.users(sb.cookies), vegeta.ConstantPacer{Freq: len(sb.cookies), Per: time.Second}, anon.total(), true)
	wait := sb.neighbourLoad(tb, r, shop.start, anon.total())
	r.shop.hits = shop.wait()
	shop.tr.CloseIdleConnections()
	wait()
	stopGears()
	logShifts(tb, sb.daemon.cfg.Log.File, "sites: run "+name, shop.start.Add(k.quiet))
	r.shop.mon.stop()
	sb.drain()
	s := r.summary()
	tb.Logf("sites: run %s: %s anonymous %.1f %% ok; neighbours %.1f %% ok (logged-in %.1f %%), p99 %s, light %.0f %% of the surge; %s: %s",
		name, shopHost, s.shop.anonOK*100, s.neighbourOK*100, s.neighbourUserOK*100, s.neighbourP99, s.neighbourLight*100, shopHost, r.shop.firstSeconds(8))
	return r
}

// neighbourLoad starts each neighbour's steady traffic for d from start,
// and returns a function that waits for it and keeps its hits in r.
func (sb *sitesBench) neighbourLoad(tb testing.TB, r *sitesRun, start time.Time, d time.Duration) (wait func()) {
	tb.Helper()
	loads := map[string]*load{}
	for _, h := range sitesBenchHosts[1:] {
		mix := sb.mixes[h]
		l := newLoad(mix, nil)
		l.start = start
		l.attack(l.attacker(8, 0), mix.anonymous(), vegeta.ConstantPacer{Freq: neighbourRate, Per: time.Second}, d, false)
		l.attack(l.attacker(8, 0), mix.users(sb.logins[h]), vegeta.ConstantPacer{Freq: len(sb.logins[h]), Per: time.Second}, d, true)
		loads[h] = l
	}
	return func() {
		for h, l := range loads {
			r.neighbours[h] = l.wait()
			l.tr.CloseIdleConnections()
		}
	}
}

// followGears asks the daemon for every host's gear twice a second until
// the returned function is called: a site's own with sites, the server's
// without.
func (sb *sitesBench) followGears(r *sitesRun, start time.Time) (stop func()) {
	c := api.NewClient(sb.daemon.cfg.Control.Socket)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s, err := c.Status(ctx)
			cancel()
			if err == nil {
				g := hostGears{at: time.Since(start), gears: map[string]string{}}
				for _, h := range sitesBenchHosts {
					g.gears[h] = s.State
				}
				for _, site := range s.Sites {
					if len(site.Hosts) == 1 {
						g.gears[site.Hosts[0]] = site.Gear
					}
				}
				r.gears = append(r.gears, g)
			}
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

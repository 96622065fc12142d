package system

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/frontdoor"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// frontHitch is FRONT=hitch: the surge through Debian's hitch too.
const frontHitch = "hitch"

// The surge through TLS (make bench-surge FRONT=hitch): the daemon in auto
// with the default config, the same surge twice, each on a fresh cache
// and daemon: over plain http straight to varnishd, and over https through
// hitch (one worker per CPU, as its manual recommends) speaking PROXY v2
// to varnishd's PROXY listener. In both, the visitors come as on the
// internet: each connects from an address of its own (loopback's
// 127.0.0.0/8 holds millions), so Varnish knows each as itself (direct,
// or by PROXY protocol) and budgets each apart. Every anonymous request is
// a new visitor (a surge is people following a shared link, reading a
// page): a new connection from a new address, over https a full TLS
// handshake (no session resumed); each logged-in user keeps one
// connection from its own address (its browser's, kept alive) and
// handshakes again only when it drops one (a request that timed out).

// tlsRun is one run of the side by side, with what it cost the CPUs.
type tlsRun struct {
	*surgeRun
	settled   float64        // load average at the start, after waiting
	cpu       cpuUse         // over the surge
	anonDials int64          // connections the anonymous visitors opened
	userDials int64          // the logged-in users'
	door      *api.FrontDoor // status front_door at the surge's end
}

// tlsReport is the side by side's result.
type tlsReport struct {
	knobs      surgeKnobs
	started    time.Time
	elapsed    time.Duration
	loadBefore float64
	cpus       int
	posts      int
	workers    int    // hitch's
	tlsWhat    string // the version and cipher suite hitch and the visitors agree on
	capacity   float64
	rate       int
	maxConns   int
	runs       []*tlsRun // http, https
}

// tlsHeading is the section's heading in BENCHMARKS.md, beside the plain
// surge's (surgeHeading).
func tlsHeading(php lampstack.Stack) string {
	if php == lampstack.FPM {
		return "## The open-loop surge through TLS: hitch in front of WordPress on PHP-FPM (0.4)"
	}
	return "## The open-loop surge through TLS: hitch in front of WordPress (0.4)"
}

// tlsSurge runs the side by side and writes its report to k.out.
func (st *surgeStack) tlsSurge(b *testing.B, k surgeKnobs) {
	h := frontdoor.RunHitchWorkers(b, st.v.ProxyAddr, runtime.NumCPU())
	roots := frontdoor.Roots(b, h.Cert)
	// The daemon reads its Varnish's log (front_door), as the default
	// config does from the host's one instance.
	st.edit = func(cfg *config.Config) { cfg.Varnish.Targets[0].Name = st.v.WorkDir }
	defer func() { st.edit = nil }()
	rep := &tlsReport{knobs: k, started: time.Now(), loadBefore: surgeLoadavg(), cpus: runtime.NumCPU(), posts: len(st.wp.Posts), workers: runtime.NumCPU()}
	if c, err := tls.Dial("tcp", h.Addr, &tls.Config{RootCAs: roots}); err != nil {
		b.Fatalf("a TLS connection to hitch: %v", err)
	} else {
		cs := c.ConnectionState()
		rep.tlsWhat = fmt.Sprintf("%s, %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite))
		c.Close()
	}
	rep.capacity = st.capacity(b, k.capacityFor)
	rep.rate = max(1, int(rep.capacity*k.factor+0.5))
	b.Logf("surge over TLS: Apache alone serves %.1f req/s; the surge offers %d req/s", rep.capacity, rep.rate)
	for _, way := range []struct {
		name, base string
		tls        *tls.Config
		hitch      int
	}{
		{"http", "http://" + st.v.HTTPAddr, nil, h.Pid},
		{"https", "https://" + h.Addr, &tls.Config{RootCAs: roots}, h.Pid},
	} {
		settled := st.settle(b, k.settle)
		r := st.visitorsRun(b, way.name, way.base, way.tls, way.hitch, k, rep.rate)
		r.settled = settled
		rep.runs = append(rep.runs, r)
	}
	rep.maxConns = st.maxConnections
	rep.elapsed = time.Since(rep.started)
	rep.write(b, k.out)
	for _, r := range rep.runs {
		s := r.summary()
		b.ReportMetric(s.anonOK*100, r.name+"-anon-ok-%")
		b.ReportMetric(r.cpu.hitch.Seconds(), r.name+"-hitch-cpu-s")
		b.ReportMetric(r.cpu.apache.Seconds(), r.name+"-php-cpu-s")
	}
	b.ReportMetric(rep.capacity, "capacity-req/s")
	b.ReportMetric(0, "ns/op")
}

// visitorsRun is surgeRun (the daemon in auto) with the visitors of the
// side by side: requests to base (over TLS with tlsConf when not nil),
// each anonymous one on a new connection from a new loopback address,
// each logged-in user on a kept connection from its own.
func (st *surgeStack) visitorsRun(tb testing.TB, name, base string, tlsConf *tls.Config, hitch int, k surgeKnobs, rate int) *tlsRun {
	tb.Helper()
	st.fresh(tb, "")
	mix := st.mix.at(base)
	mix.direct = true // each visitor's own address, no X-Forwarded-For
	tb.Logf("surge over TLS: run %s: %s of %d req/s, then %s of %d req/s; load average %.2f", name, k.quiet, k.quietRate, k.surge, rate, surgeLoadavg())
	r := &tlsRun{surgeRun: &surgeRun{name: name, surgeAt: k.quiet, surgeEnd: k.quiet + k.surge, loadStart: surgeLoadavg()}}
	var fresh atomic.Uint64
	anonTr := visitorTransport(tlsConf, false, &r.anonDials, func() net.IP { return anonVisitorIP(fresh.Add(1) - 1) })
	l := newLoad(mix, anonTr)
	r.mon = st.watch(tb, l.start)
	anon := phasePacer{{k.quietRate, k.quiet}, {rate, k.surge}}
	l.attack(attackerOn(anonTr, 32), mix.anonymous(), anon, anon.total(), false)
	var userTrs []*http.Transport
	for i, c := range st.cookies {
		ip := net.IPv4(127, 2, 0, byte(i+1))
		tr := visitorTransport(tlsConf, true, &r.userDials, func() net.IP { return ip })
		userTrs = append(userTrs, tr)
		l.attack(attackerOn(tr, 2), mix.users([]string{c}), vegeta.ConstantPacer{Freq: 1, Per: time.Second}, anon.total(), true)
	}
	procs := st.procGroups(hitch)
	time.Sleep(time.Until(l.start.Add(r.surgeAt)))
	before := procs.snapshot()
	time.Sleep(time.Until(l.start.Add(r.surgeEnd)))
	r.cpu = procs.snapshot().since(before)
	if s, err := st.daemon.status(); err == nil {
		r.door = s.FrontDoor
	}
	r.hits = l.wait()
	anonTr.CloseIdleConnections()
	for _, tr := range userTrs {
		tr.CloseIdleConnections()
	}
	r.mon.stop()
	st.drain()
	s := r.summary()
	tb.Logf("surge over TLS: run %s: anonymous %.1f %% ok, logged-in %.1f %% ok, time to protect %s; CPU over the surge: %s; front_door %+v",
		name, s.anonOK*100, s.userOK*100, s.protect, r.cpu, r.door)
	return r
}

// anonVisitorIP is the n-th anonymous visitor's address: 127.1.0.1 on,
// 254 to a /24, a new one for every request of a run.
func anonVisitorIP(n uint64) net.IP {
	n %= 254 * 256 * 254
	return net.IPv4(127, byte(1+n/(254*256)), byte(n/254%256), byte(n%254+1))
}

// visitorTransport dials from the address from gives, counting its
// connections in dials; over TLS with tlsConf when not nil (no session
// cache: a new connection is a full handshake); keepAlive false: a
// connection for each request.
func visitorTransport(tlsConf *tls.Config, keepAlive bool, dials *int64, from func() net.IP) *http.Transport {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		atomic.AddInt64(dials, 1)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from()}, KeepAlive: 30 * time.Second}
		return d.DialContext(ctx, network, addr)
	}
	return &http.Transport{DialContext: dial, TLSClientConfig: tlsConf, DisableKeepAlives: !keepAlive,
		MaxIdleConnsPerHost: 10000, TLSHandshakeTimeout: surgeTimeout}
}

// attackerOn is load.attacker on the transport tr.
func attackerOn(tr *http.Transport, workers uint64) *vegeta.Attacker {
	return vegeta.NewAttacker(vegeta.Client(&http.Client{Transport: tr}), vegeta.Timeout(surgeTimeout),
		vegeta.Redirects(vegeta.NoFollow), vegeta.MaxBody(0), vegeta.Workers(workers))
}

func (rep *tlsReport) write(tb testing.TB, out string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		tb.Fatal(err)
	}
	chart := strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
	rep.chart(tb, chart)
	link := os.Getenv("SURGE_CHART_LINK")
	if link == "" {
		link = filepath.Base(chart)
	}
	k := rep.knobs
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("%s", tlsHeading(k.stack))
	p("")
	p("Measured %s with `make bench-surge FRONT=hitch` (`BenchmarkSurge`, tests/system) at commit %s: %d CPUs, %s; %s, %s, %s.",
		rep.started.UTC().Format("2006-01-02 15:04 UTC"), commit(tb), rep.cpus, cpuModel(), version("varnishd", "-V"), version("apache2", "-v"), version("hitch", "--version"))
	p("Load average before the run: %.2f (the machine is shared: others' work counts). The run took %s.", rep.loadBefore, rep.elapsed.Round(time.Second))
	p("")
	php := fmt.Sprintf("Apache prefork (%d workers) + mod_php", apacheWorkers)
	if k.stack == lampstack.FPM {
		php = fmt.Sprintf("Apache event + proxy_fcgi to PHP-FPM (a static pool of %d children)", apacheWorkers)
	}
	mc := "no `backend.max_connections`"
	if rep.maxConns > 0 {
		mc = fmt.Sprintf("`backend.max_connections: %d`", rep.maxConns)
	}
	p("The surge of the section above (Debian's WordPress, %d posts, on %s and MariaDB, behind varnishd; the same anonymous Zipf mix with `fbclid`/`utm_*` and %d logged-in users at 1 request/s each), run twice with the daemon in auto and the default config (%s; its target named, so that it reads its Varnish's log for `front_door`), each on a fresh cache and a fresh daemon:",
		rep.posts, php, len(surgeUsers), mc)
	p("`http`, plain http straight to varnishd's listener; `https`, TLS through Debian's hitch (%d workers, one per CPU as its manual recommends; a self-signed ECDSA P-256 certificate; %s) speaking PROXY v2 to varnishd's PROXY listener (`-a proxy=127.0.0.1:PORT,PROXY`).", rep.workers, rep.tlsWhat)
	p("The visitors come as on the internet, in both runs alike: each connects from an address of its own (loopback's 127.0.0.0/8), so Varnish knows each as itself (`direct` over http, `proxy_protocol` through hitch) and budgets each apart.")
	p("**New TLS sessions**: every anonymous request is a new visitor (a surge is people following a shared link to read a page): a new connection from a new address, and over https a full handshake, no session resumed. Each logged-in user keeps one connection (its browser's, kept alive) and handshakes again only after dropping one (a request past the %s timeout).", surgeTimeout)
	p("The load generator (vegeta, open loop) runs on the same CPUs, and its side of each handshake costs about what hitch's does.")
	p("")
	p("**Capacity**: Apache alone serves **%.1f req/s** of the anonymous mix. Each run: %s of %d req/s, then **%d req/s (%.4g× capacity) for %s**.",
		rep.capacity, k.quiet, k.quietRate, rep.rate, k.factor, k.surge)
	if k.surge != 60*time.Second {
		p("The surge ran %s (`SURGE_FOR`), shorter than the default minute, to keep the run short.", k.surge)
	}
	p("")
	p("| run | anonymous ok | logged-in ok | anonymous ok, first 10 s | p50 / p99 / max s | time to protect | new connections (anonymous + logged-in) | backend requests | hit ratio | heavy after | `front_door` at the surge's end |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rep.runs {
		s := r.summary()
		p("| `%s` (%s) | %s of %d | %s of %d | %s | %s | %s | %d + %d | %d | %.3f | %s | %s |", r.name, runNotes[r.name],
			pct(s.anonOK), s.anonN, pct(s.userOK), s.userN, pct(s.first10OK), lat(s.lat), s.protect,
			r.anonDials, r.userDials, s.backend, s.hitRatio, s.toHeavy, doorText(r.door))
	}
	p("")
	for _, r := range rep.runs {
		anon, anonErr := tally(r.between(r.surgeAt, r.surgeEnd), false)
		user, userErr := tally(r.between(r.surgeAt, r.surgeEnd), true)
		p("- `%s`, the surge's 200s by `X-Cache`: anonymous %s (failures: %s); logged-in %s (failures: %s). Load average at the start (after waiting, %s at most, for less than half a CPU per CPU): %.2f.",
			r.name, anon, anonErr, user, userErr, k.settle, r.settled)
	}
	p("")
	p("**CPU over the surge** (%s, %d CPUs: %.0f CPU-seconds to give), from `/proc/PID/stat` of each process group (utime + stime, and the children it reaped) and `/proc/stat` for the machine:",
		k.surge, rep.cpus, k.surge.Seconds()*float64(rep.cpus))
	p("")
	p("The processes' times come from the scheduler and the machine's from its ticks: their sums differ by up to a tenth.")
	p("")
	p("| run | machine busy | hitch | varnishd | Apache + PHP | MariaDB | gearshift | load generator | the rest (others' work, the kernel's) |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rep.runs {
		c := r.cpu
		p("| `%s` | %s (%s) | %s | %s | %s | %s | %s | %s | %s |", r.name, cpuS(c.busy), pct(c.busy.Seconds()/c.total.Seconds()),
			cpuS(c.hitch), cpuS(c.varnish), cpuS(c.apache), cpuS(c.db), cpuS(c.daemon), cpuS(c.load), cpuS(c.rest()))
	}
	p("")
	p("%s", rep.verdict())
	p("")
	p("![Per second, each run: offered requests, 200s, backend requests; p99 and the gear](%s)", link)
	p("")
	p("Per second, one panel per run, as in the plain surge's chart: the requests offered, the 200s among them, the requests Apache logged; the p99 of the time to a good answer (a failure counts 5 s) and the gear. Dashed lines: the surge.")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("surge over TLS: report in %s, chart in %s\n%s", out, chart, b.String())
}

// verdict says, from the runs' figures, what TLS cost and where the limit
// lay: in the https run, hitch's CPU against PHP's.
func (rep *tlsReport) verdict() string {
	if len(rep.runs) != 2 {
		return ""
	}
	plain, tlsRun := rep.runs[0], rep.runs[1]
	ps, ts := plain.summary(), tlsRun.summary()
	c := tlsRun.cpu
	share := func(d time.Duration) string { return pct(d.Seconds() / c.busy.Seconds()) }
	var w strings.Builder
	fmt.Fprintf(&w, "**Where the limit lies.** At %.4g×, %s of the anonymous requests were served over https against %s over http (logged-in: %s against %s). ",
		rep.knobs.factor, pct(ts.anonOK), pct(ps.anonOK), pct(ts.userOK), pct(ps.userOK))
	fmt.Fprintf(&w, "In the surge's first 10 s (the cache cold, the daemon shifting): %s against %s, the time to protect %s against %s. ",
		pct(ts.first10OK), pct(ps.first10OK), ts.protect, ps.protect)
	fmt.Fprintf(&w, "Through hitch, the machine's CPUs were %s busy (%s over http): hitch took %s of the busy time, the load generator (the visitors' side of the same handshakes) %s, Apache and PHP %s, varnishd %s. ",
		pct(c.busy.Seconds()/c.total.Seconds()), pct(plain.cpu.busy.Seconds()/plain.cpu.total.Seconds()), share(c.hitch), share(c.load), share(c.apache), share(c.varnish))
	if n := tlsRun.anonDials + tlsRun.userDials; n > 0 && c.hitch > 0 {
		perConn := c.hitch / time.Duration(n)
		fmt.Fprintf(&w, "hitch's CPU per new connection (its handshake, then the page through it): %.2f ms, about %.0f new visitors a second for each CPU it has. ",
			float64(perConn.Microseconds())/1000, float64(time.Second)/float64(perConn))
	}
	if ts.backend > 0 && c.apache > 0 {
		perPage := c.apache / time.Duration(ts.backend)
		fmt.Fprintf(&w, "Apache and PHP's per request that reached them: %.1f ms (what Apache alone serves, %.1f req/s on %d CPUs, says the same order). ",
			float64(perPage.Microseconds())/1000, rep.capacity, rep.cpus)
	}
	if c.hitch > c.apache {
		w.WriteString("The terminator, not PHP, took more of the CPUs: once the cache serves the surge, PHP runs for a few requests a second, while every new visitor's handshake is paid in full.")
	} else {
		w.WriteString("PHP still took more of the CPUs than the terminator.")
	}
	if c.busy.Seconds()/c.total.Seconds() >= 0.9 {
		w.WriteString(" The CPUs were saturated: with the terminator, the server and (here) the visitors on the same CPUs, the CPUs are the limit, and the handshakes a large share of them.")
	} else if n := tlsRun.anonDials + tlsRun.userDials; n > 0 && c.hitch > 0 {
		ceiling := float64(rep.cpus) * float64(n) / c.hitch.Seconds()
		if ts.first10OK < ps.first10OK {
			w.WriteString(" What TLS cost shows in those first seconds, when the cold cache's misses, the shift and every new visitor's handshake come together.")
		}
		fmt.Fprintf(&w, " Over the surge as a whole the CPUs had room (%s busy through hitch): past its first seconds neither hitch nor PHP was the limit at this rate. hitch alone would fill the %d CPUs at about %.0f new visitors a second (%.0f× this surge's), fewer with the visitors' side of the handshakes on the same CPUs, as here.",
			pct(c.busy.Seconds()/c.total.Seconds()), rep.cpus, ceiling, ceiling/float64(rep.rate))
	}
	return w.String()
}

func doorText(f *api.FrontDoor) string {
	if f == nil {
		return "null"
	}
	return fmt.Sprintf("%d direct, %d PROXY, %d forwarded, %d unidentified", f.Direct, f.ProxyProtocol, f.Forwarded, f.Unidentified)
}

func cpuS(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// chart draws each run's panels (surgeRun.panels) one above the other.
func (rep *tlsReport) chart(tb testing.TB, file string) {
	tb.Helper()
	sr := &surgeReport{knobs: rep.knobs}
	var rows [][]*plot.Plot
	for _, r := range rep.runs {
		rates, p99 := r.panels(sr)
		rows = append(rows, []*plot.Plot{rates}, []*plot.Plot{p99})
	}
	writePanels(tb, file, rows, vg.Length(230*len(rep.runs)), 2)
}

// procGroups are the processes whose CPU the side by side counts.
type procGroups struct {
	hitch, apache, fpm, db, daemon int // process group ids (the daemon: its pid)
	varnish                        func() int
}

// procGroups finds the stack's processes: hitch's group (pid hitch),
// Apache's (and PHP-FPM's) from their pid files, MariaDB's by its
// socket on its command line, the daemon's pid.
func (st *surgeStack) procGroups(hitch int) procGroups {
	g := procGroups{hitch: hitch, varnish: func() int { return pgrpOf(st.v.CacheChild()) }}
	pidFile := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(st.apache.Dir, name))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pgrpOf(pid)
	}
	g.apache, g.fpm = pidFile("apache.pid"), pidFile("php-fpm.pid")
	if st.daemon != nil && st.daemon.cmd != nil && st.daemon.cmd.Process != nil {
		g.daemon = st.daemon.cmd.Process.Pid
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "mariadbd") && strings.Contains(string(b), st.wp.DB.Socket) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			g.db = pgrpOf(pid)
			break
		}
	}
	return g
}

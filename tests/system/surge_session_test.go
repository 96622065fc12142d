package system

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/profiles"
)

// sessionReport is the surge on the session-on-every-page site: what
// gearshift does for an application that gives every visitor a session.
type sessionReport struct {
	capacity float64
	rate     int
	runs     []*surgeRun // plain, auto, heavy
}

// sessionSurge runs the same surge, anonymous visitors only, on the
// session-on-every-page site (lampstack.SessionSiteFiles) behind the same
// varnishd: Varnish passing every page, the daemon in auto, heavy pinned.
// Every page sets a session cookie, so no gear may share one (issue 28's
// guest pages is what would); the run measures that.
func (st *surgeStack) sessionSurge(tb testing.TB, k surgeKnobs) *sessionReport {
	tb.Helper()
	wp, mix, backend := st.apache, st.mix, st.backend
	defer func() { st.apache, st.mix, st.backend, st.anonymousOnly = wp, mix, backend, false }()
	a, _ := lampstack.StartSessionSite(tb, st.php, tb.TempDir(), sessionWorkMS, st.bin)
	pages := []string{}
	for i := 1; i <= surgePosts; i++ {
		pages = append(pages, fmt.Sprintf("/?article=%d", i))
	}
	st.apache, st.anonymousOnly = a, true
	st.backend = profiles.BackendAt("127.0.0.1", a.Port)
	st.mix = newSurgeMix(mix.base, mix.host, pages)
	rep := &sessionReport{capacity: st.capacity(tb, k.capacityFor)}
	rep.rate = max(1, int(rep.capacity*k.factor+0.5))
	tb.Logf("surge: the session site alone serves %.1f req/s; the surge offers %d req/s", rep.capacity, rep.rate)
	st.settle(tb, k.settle)
	for _, run := range []struct{ name, gear string }{{"plain", plainGear}, {"auto", ""}, {"heavy", "heavy"}} {
		rep.runs = append(rep.runs, st.surgeRun(tb, run.name, run.gear, k, rep.rate))
	}
	return rep
}

// sessionWorkMS is what a page of the session site costs in the surge:
// about what a WordPress page costs here, so that 10× its capacity is a
// rate this machine can send.
const sessionWorkMS = 25

func (rep *sessionReport) write(p func(string, ...any), k surgeKnobs) {
	p("")
	p("**An application that gives every visitor a session.** The same surge, anonymous visitors only, on the session-on-every-page site (`%s`: PHP's `session_start()` on every page, so a `PHPSESSID` cookie and `no-store` on every answer) on the same Apache (each page made to cost %d ms of CPU, as a real application's would), behind the same varnishd: it serves **%.1f req/s** alone, and the surge offers %d req/s (%.4g×) for %s.",
		lampstack.SessionSiteFiles, sessionWorkMS, rep.capacity, rep.rate, k.factor, k.surge)
	p("")
	p("| run | anonymous ok | anonymous ok, first 10 s | p50 / p99 / max s | time to protect | backend requests | hit ratio | gear at the surge |")
	p("|---|---:|---:|---:|---:|---:|---:|---|")
	var cache []string
	for _, r := range rep.runs {
		s := r.summary()
		p("| `%s` | %s of %d | %s | %s | %s | %d | %.3f | %s |", r.name, pct(s.anonOK), s.anonN, pct(s.first10OK), lat(s.lat), s.protect, s.backend, s.hitRatio, s.gearAtSurge)
		c, errs := tally(r.between(r.surgeAt, r.surgeEnd), false)
		cache = append(cache, fmt.Sprintf("`%s` %s (failures: %s)", r.name, c, errs))
	}
	p("")
	p("The surge's 200s by `X-Cache`: %s. A response that sets a cookie is never shared, in any gear (a shared `Set-Cookie` is session fixation, and the page may carry that session's token): heavy serves such a site at PHP's speed until it learns which pages are the same for every new visitor (issue 28).", strings.Join(cache, "; "))
}

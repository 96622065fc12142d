package system

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// purgeWindow is how long after a publish the backend's fetches of the
// purged page, and its visitors' answers, are counted.
const purgeWindow = 10 * time.Second

// purgeProbe is a publish in the middle of a surge: a PURGE of the home
// page, as a WordPress purge plugin sends it from the server itself,
// then what it cost in the next purgeWindow.
type purgeProbe struct {
	at      time.Duration // when the PURGE was sent, from the run's start
	status  int           // Varnish's answer to it
	fetches int           // Apache's requests for / without a cookie in the window
	wg      sync.WaitGroup
}

// homeLine is how Apache's access log (lampstack's format) writes an
// anonymous request for the home page: no cookie. A logged-in user's
// copy goes at the PURGE by design, and comes back on its next view.
var homeLine = regexp.MustCompile(`(?m)"GET / HTTP/1\.1" \d+ -$`)

// homeFetches counts the home page's anonymous requests in Apache's
// access log.
func (st *surgeStack) homeFetches(tb testing.TB) int {
	b, err := os.ReadFile(lampstack.AccessLog(st.apache.Dir))
	if err != nil {
		tb.Error(err)
	}
	return len(homeLine.FindAllIndex(b, -1))
}

// publishAt sends the PURGE at `at` from start, in the background; wait
// for its count with probe.wg.
func (st *surgeStack) publishAt(tb testing.TB, start time.Time, at time.Duration) *purgeProbe {
	p := &purgeProbe{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		time.Sleep(time.Until(start.Add(at)))
		before := st.homeFetches(tb)
		p.at = time.Since(start)
		req, err := http.NewRequest("PURGE", "http://"+st.v.HTTPAddr+"/", nil)
		if err != nil {
			tb.Error(err)
			return
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			tb.Errorf("PURGE / in the surge: %v", err)
			return
		}
		resp.Body.Close()
		p.status = resp.StatusCode
		time.Sleep(time.Until(start.Add(p.at + purgeWindow)))
		p.fetches = st.homeFetches(tb) - before
	}()
	return p
}

// homeAnswers are the home page's requests sent in the window after the
// PURGE, and how many of them failed.
func (r *surgeRun) homeAnswers() (n, failed int) {
	for _, h := range r.between(r.purge.at, r.purge.at+purgeWindow) {
		if h.page != 0 {
			continue
		}
		n++
		if !h.ok() {
			failed++
		}
	}
	return n, failed
}

// purgeLine is the report's sentence on a run's publish.
func (r *surgeRun) purgeLine() string {
	n, failed := r.homeAnswers()
	return fmt.Sprintf("- `%s`: `PURGE /` at +%.1f s (%s, answered %d): Apache got %d anonymous requests for / in the next %s; %d of the %d requests for / sent then failed.",
		r.name, r.purge.at.Seconds(), r.mon.gearAt(r.purge.at), r.purge.status, r.purge.fetches, purgeWindow, failed, n)
}

// run is the report's run of that name, nil when there is none.
func (rep *surgeReport) run(name string) *surgeRun {
	for _, r := range rep.runs {
		if r.name == name {
			return r
		}
	}
	return nil
}

// logShifts logs the daemon's shifts of run r, each at its time from the
// surge's start and with its reason: the first seconds of a surge.
func (st *surgeStack) logShifts(tb testing.TB, r *surgeRun, start time.Time) {
	tb.Helper()
	logShifts(tb, st.daemon.cfg.Log.File, "surge: run "+r.name, start.Add(r.surgeAt))
}

// logShifts logs the shifts the daemon's log file at path tells (the
// server's, and each site's), from surgeAt, each line begun with what.
func logShifts(tb testing.TB, path, what string, surgeAt time.Time) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Error(err)
		return
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var l struct {
			TS                  time.Time
			Msg, From, To, Site string
			Reason              string
		}
		if json.Unmarshal(line, &l) != nil || (l.Msg != "state change" && l.Msg != "site shifted") {
			continue
		}
		if l.Site != "" {
			l.Site = "site " + l.Site + " "
		}
		tb.Logf("%s: %+.1f s from the surge's start: %s%s → %s: %s", what, l.TS.Sub(surgeAt).Seconds(), l.Site, l.From, l.To, l.Reason)
	}
}

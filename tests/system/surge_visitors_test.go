package system

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// xffOf is the X-Forwarded-For of n requests of tr, in order.
func xffOf(t *testing.T, tr vegeta.Targeter, n int) []string {
	t.Helper()
	var out []string
	for range n {
		var tg vegeta.Target
		if err := tr(&tg); err != nil {
			t.Fatal(err)
		}
		out = append(out, http.Header(tg.Header).Get("X-Forwarded-For"))
	}
	return out
}

func distinct(xs []string) map[string]int {
	m := map[string]int{}
	for _, x := range xs {
		m[x]++
	}
	return m
}

// TestSurgeMixVisitors: the benchmarks' load names its visitors in
// X-Forwarded-For: each anonymous request the next of crowdSize
// documentation addresses (or of n visitors with crowdOf), each logged-in
// user an address of its own, none shared; the flood's hostile client
// and a direct mix send none.
func TestSurgeMixVisitors(t *testing.T) {
	m := newSurgeMix("http://127.0.0.1:1", "127.0.0.1:1", []string{"/post-1/", "/post-2/"})
	anon := xffOf(t, m.anonymous(), 2*crowdSize)
	crowd := distinct(anon)
	if len(crowd) != crowdSize {
		t.Errorf("%d anonymous requests came from %d addresses, want %d", len(anon), len(crowd), crowdSize)
	}
	for a := range crowd {
		ip := net.ParseIP(a)
		if ip == nil || !(strings.HasPrefix(a, "198.51.100.") || strings.HasPrefix(a, "192.0.2.")) || strings.HasSuffix(a, ".0") || strings.HasSuffix(a, ".255") {
			t.Errorf("anonymous visitor %q: want a host address of 198.51.100.0/24 or 192.0.2.0/24", a)
		}
	}
	if anon[0] == anon[1] {
		t.Errorf("two anonymous requests in a row from %s: each should be the next visitor's", anon[0])
	}

	twenty := distinct(xffOf(t, m.crowdOf(20).anonymous(), 100))
	if len(twenty) != 20 {
		t.Errorf("crowdOf(20): %d addresses, want 20", len(twenty))
	}
	for a, n := range twenty {
		if n != 5 {
			t.Errorf("crowdOf(20): %s sent %d of 100 requests, want 5", a, n)
		}
	}

	cookies := []string{"c=alice", "c=bob", "c=carol"}
	users := m.users(cookies)
	byCookie := map[string]string{}
	for range 9 {
		var tg vegeta.Target
		users(&tg)
		h := http.Header(tg.Header)
		c, a := h.Get("Cookie"), h.Get("X-Forwarded-For")
		if prev, ok := byCookie[c]; ok && prev != a {
			t.Errorf("user %s came from %s, then from %s", c, prev, a)
		}
		if crowd[a] > 0 || a == "" {
			t.Errorf("user %s from %q: want an address of its own, not the crowd's", c, a)
		}
		byCookie[c] = a
	}
	if len(distinct(func() (as []string) {
		for _, a := range byCookie {
			as = append(as, a)
		}
		return as
	}())) != len(cookies) {
		t.Errorf("users' addresses %v: want one each", byCookie)
	}

	for _, a := range xffOf(t, m.hostile(), 30) {
		if a != "" {
			t.Fatalf("the hostile client sends X-Forwarded-For %q: it is to be one client, its own address", a)
		}
	}
	d := m.at("http://127.0.0.1:2")
	d.direct = true
	if a := xffOf(t, d.anonymous(), 3); strings.Join(a, "") != "" {
		t.Errorf("a direct mix sends X-Forwarded-For %q", a)
	}
}

// TestSurgeVisitorsForwarded: the surge's load (its anonymous visitors and
// logged-in users, from 127.0.0.1, a trusted proxy) is counted by the
// daemon as forwarded, not unidentified, and check stays quiet, where the
// same number of requests without X-Forwarded-For is a warning
// (TestFrontDoorInStatus).
func TestSurgeVisitorsForwarded(t *testing.T) {
	testenv.Need(t, "varnishlog", "varnish")
	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Varnish.Targets[0].Name = v.WorkDir
	})
	d.eventually("front_door read from the Varnish log", 30*time.Second, func() error {
		if s, err := d.status(); err != nil {
			return err
		} else if s.FrontDoor == nil {
			return fmt.Errorf("front_door null")
		}
		return nil
	})
	mix := newSurgeMix("http://"+v.HTTPAddr, v.HTTPAddr, []string{"/post-1/", "/post-2/", "/post-3/"})
	l := newLoad(mix, nil)
	l.attack(l.attacker(4, 0), mix.anonymous(), vegeta.ConstantPacer{Freq: 60, Per: time.Second}, 2*time.Second, false)
	l.attack(l.attacker(2, 0), mix.users([]string{"a=1", "b=2"}), vegeta.ConstantPacer{Freq: 10, Per: time.Second}, 2*time.Second, true)
	hits := l.wait()
	l.tr.CloseIdleConnections()
	answered := 0
	for _, h := range hits {
		if h.code != 0 {
			answered++
		}
	}
	if answered < 100 {
		t.Fatalf("%d of %d requests answered, want 100 or more", answered, len(hits))
	}
	d.eventually("the surge's requests counted as forwarded", 30*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if f := s.FrontDoor; f == nil || f.Forwarded < answered {
			return fmt.Errorf("front_door %+v, want %d forwarded", f, answered)
		}
		return nil
	})
	s, err := d.status()
	if err != nil {
		t.Fatal(err)
	}
	if f := s.FrontDoor; f.Unidentified >= f.Forwarded || f.MostlyUnidentified() {
		t.Errorf("front_door %+v: the surge's visitors counted as unidentified", f)
	}
	if out, errOut, code := d.gs("check"); code != exitOK || strings.Contains(out, "unidentified") {
		t.Errorf("check after the surge's load: exit %d %q %q, want OK", code, out, errOut)
	}
}

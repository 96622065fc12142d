package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gearshift/gearshift/controller/hooks"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
)

func TestAdviser(t *testing.T) {
	sum := top.Summary{Requests: 100, Reasons: []top.ReasonShare{
		{Reason: "session", Share: 0.41, Cookie: "_my_tracker", Setting: "add the cookie to profiles.ignore_cookies if it does not identify a user"},
		{Reason: "method", Share: 0.29, Request: "POST /xmlrpc.php"},
		{Reason: "miss", Share: 0.05, Request: "GET /?s=*"},
	}}
	var err error
	reads := 0
	read := func(ctx context.Context, name string, d time.Duration) (top.Summary, error) {
		reads++
		if name != "/var/lib/varnish/www" || d != adviceRead {
			t.Errorf("read %q for %s", name, d)
		}
		return sum, err
	}
	core, logs := observer.New(zapcore.InfoLevel)
	a := newAdviser(read, "/var/lib/varnish/www", zap.New(core))
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	wait := time.Minute
	dec := func(g state.Gear, share float64) state.Decision {
		return state.Decision{Gear: g, Since: t0, Signals: state.Signals{Values: map[string]float64{sensor.BackendShare: share}}}
	}
	step := func(at time.Duration, d state.Decision) {
		a.step(t.Context(), t0.Add(at), d, wait)
		if a.running {
			a.done(t0.Add(at+adviceRead), <-a.results)
		}
	}

	step(0, dec(state.Heavy, 0.62))
	step(30*time.Second, dec(state.Heavy, 0.62))
	if reads != 0 || a.line != "" {
		t.Fatalf("read the log after 30s of a high share (want to wait %s): %d reads, advice %q", wait, reads, a.line)
	}
	step(3*time.Minute+55*time.Second, dec(state.Heavy, 0.62))
	want := "heavy for 4m but 62 % of requests reach the backend: 41 % session (cookie _my_tracker) — " +
		"add the cookie to profiles.ignore_cookies if it does not identify a user; 29 % method POST /xmlrpc.php"
	if reads != 1 || a.line != want {
		t.Fatalf("advice after %d reads:\n got %q\nwant %q", reads, a.line, want)
	}
	if logs.FilterMessage("gear not effective").Len() != 1 {
		t.Errorf("the advice is not logged: %v", logs.All())
	}
	// Not read again within the wait.
	step(4*time.Minute, dec(state.Heavy, 0.62))
	if reads != 1 {
		t.Errorf("%d reads within a minute of the last", reads)
	}
	// A failing read keeps the advice in force and is logged.
	err = errors.New("varnishlog: no such instance")
	step(6*time.Minute, dec(state.Heavy, 0.62))
	if reads != 2 || a.line != want || logs.FilterMessage("read the Varnish log for advice").Len() != 1 {
		t.Errorf("after a failing read: %d reads, advice %q, log %v", reads, a.line, logs.All())
	}
	err = nil
	// The share dips for a poll: the advice stays. It falls for the
	// wait: the advice goes; the incident's stays for the hooks.
	step(6*time.Minute+30*time.Second, dec(state.Heavy, 0.05))
	step(6*time.Minute+31*time.Second, dec(state.Heavy, 0.62))
	step(7*time.Minute, dec(state.Heavy, 0.05))
	if a.line != want {
		t.Errorf("a dip of the share for a poll cleared the advice: %q", a.line)
	}
	step(7*time.Minute+30*time.Second, dec(state.Heavy, 0.05))
	if a.line != want {
		t.Errorf("the share low for 30s (the wait is %s) cleared the advice: %q", wait, a.line)
	}
	step(8*time.Minute, dec(state.Heavy, 0.05))
	if a.line != "" || len(a.env()) != 1 || a.env()[0] != hooks.EnvAdvice+"="+want {
		t.Errorf("share fell for the wait: advice %q, hook env %q", a.line, a.env())
	}
	step(9*time.Minute, dec(state.Light, 0.9))
	if a.line != "" || a.env() != nil {
		t.Errorf("in light: advice %q, hook env %q", a.line, a.env())
	}
	// No target with a name: never any advice.
	none := newAdviser(read, "", zap.NewNop())
	none.step(t.Context(), t0.Add(time.Hour), dec(state.Heavy, 1), 0)
	if none.running {
		t.Error("an adviser without a target read a log")
	}
}

// A VCL that logs no reason words (a site's own, in label mode) gets no
// made-up reason.
func TestAdviceWithoutReasons(t *testing.T) {
	got := adviceLine(adviceResult{gear: state.Heavy, in: 2 * time.Minute, share: 0.8,
		sum: top.Summary{Requests: 50, Reasons: []top.ReasonShare{{Reason: top.Unknown, Share: 1}}}})
	want := "heavy for 2m but 80 % of requests reach the backend, for reasons the VCL in use does not log (gearshift's profiles log them: see gearshift top)"
	if got != want {
		t.Errorf("advice\n got %q\nwant %q", got, want)
	}
}

// With guest_pages on, the pages still reaching the backend for set_cookie
// are those found to differ: the advice does not suggest strip_set_cookies,
// which would share them. With it off, it does.
func TestAdviceOnSetCookie(t *testing.T) {
	sum := top.Summary{Requests: 50, Reasons: []top.ReasonShare{{Reason: "set_cookie", Share: 0.9, Cookie: "PHPSESSID",
		Setting: "profiles.strip_set_cookies, if heavy may drop that cookie"}}}
	on := adviceLine(adviceResult{gear: state.Heavy, in: time.Minute, share: 0.9, sum: sum, guests: true})
	if strings.Contains(on, "strip_set_cookies") || !strings.Contains(on, "guest_pages already shares") {
		t.Errorf("advice with guest_pages on: %q, want the guest pages named and no strip_set_cookies", on)
	}
	off := adviceLine(adviceResult{gear: state.Heavy, in: time.Minute, share: 0.9, sum: sum})
	if !strings.Contains(off, "strip_set_cookies") {
		t.Errorf("advice with guest_pages off: %q, want the reason's setting", off)
	}
}

// TestAdviceOverBudget: clients the profiles refused for their budget in
// the last minute are in the status, and its advice names them and what
// to change when they are people.
func TestAdviceOverBudget(t *testing.T) {
	refused := &top.Refusals{}
	r := newRig(t, nil, func(o *Options) { o.Refusals = refused })
	if st := r.tick(t); st.OverBudget != 0 || st.Advice != "" {
		t.Fatalf("before any refusal: over_budget %d, advice %q", st.OverBudget, st.Advice)
	}
	now := time.Now()
	for i := 0; i < 30; i++ {
		refused.Add(now, "192.0.2.7")
	}
	refused.Add(now, "198.51.100.1")
	st := r.tick(t)
	if st.OverBudget != 31 || strings.Join(st.OverBudgetClients, " ") != "192.0.2.7 198.51.100.1" {
		t.Errorf("over_budget %d, clients %q; want 31 from 192.0.2.7 and 198.51.100.1", st.OverBudget, st.OverBudgetClients)
	}
	want := "31 requests over profiles.client_budget (10 a second, 100 at once) in the last minute got a stored copy or 429, most from 192.0.2.7, 198.51.100.1"
	if !strings.HasPrefix(st.Advice, want) || !strings.Contains(st.Advice, "profiles.trusted_proxies") {
		t.Errorf("advice %q\nwant it to start %q and name profiles.trusted_proxies", st.Advice, want)
	}
}

func TestJoinAdvice(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"", ""}, ""},
		{[]string{"a", ""}, "a"},
		{[]string{"", "b"}, "b"},
		{[]string{"a", "b"}, "a; and b"},
	} {
		if got := joinAdvice(c.in...); got != c.want {
			t.Errorf("joinAdvice(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

package top

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/golden"
	"github.com/gearshift/gearshift/profiles"
)

// surge is a backend's traffic in heavy during a surge: a tracking cookie,
// a POST flood, a search crawl and a plugin's Set-Cookie.
func surge() *Tally {
	t := NewTally()
	add := func(n int, q Request) {
		for i := 0; i < n; i++ {
			q := q
			if q.Client == "" {
				q.Client = fmt.Sprintf("203.0.113.%d", i%7)
			}
			t.Add(q)
		}
	}
	add(41, Request{Method: "GET", URL: "/", Reason: "session", Detail: "cookie=_my_tracker", Cookie: "_my_tracker"})
	add(29, Request{Method: "POST", URL: "/xmlrpc.php", Reason: "method", Client: "198.51.100.23"})
	add(20, Request{Method: "GET", URL: "/?s=*", Reason: "miss"})
	add(10, Request{Method: "GET", URL: "/shop", Reason: "set_cookie", Detail: "cookie=plugin_visit", Cookie: "plugin_visit"})
	return t
}

func TestSummary(t *testing.T) {
	s := surge().Summary("site", 10)
	want := []string{
		"41 % session (cookie _my_tracker)",
		"29 % method POST /xmlrpc.php",
		"20 % miss GET /?s=*",
		"10 % set_cookie (cookie plugin_visit)",
	}
	if len(s.Reasons) != len(want) {
		t.Fatalf("reasons = %v, want %d", s.Reasons, len(want))
	}
	for i, w := range want {
		if got := s.Reasons[i].String(); got != w {
			t.Errorf("reason %d = %q, want %q", i, got, w)
		}
	}
	if s.Requests != 100 || s.Rate != 10 {
		t.Errorf("requests %d at %g/s, want 100 at 10/s", s.Requests, s.Rate)
	}
	top, ok := s.Top()
	if r, _ := profiles.LookupReason("session"); !ok || top.Setting != r.Setting {
		t.Errorf("Top() = %+v, %v; want session with its setting", top, ok)
	}
}

func TestTallyBounded(t *testing.T) {
	tl := NewTally()
	for i := 0; i < 3*MaxKeys; i++ {
		tl.Add(Request{Method: "GET", URL: fmt.Sprintf("/p%d", i), Reason: "miss", Client: fmt.Sprintf("10.0.%d.%d", i/250, i%250)})
	}
	for b := By(0); b < numBy; b++ {
		if n := len(tl.rows[b]); n > MaxKeys+1 {
			t.Errorf("%s: %d rows, want at most %d", b, n, MaxKeys+1)
		}
		for k, r := range tl.rows[b] {
			for o, m := range r.sub {
				if len(m) > MaxSub+1 {
					t.Errorf("%s %q: %d values of %s, want at most %d", b, k, len(m), By(o), MaxSub+1)
				}
			}
		}
	}
	rows := tl.Rows(ByURL, 1, 1)
	if rows[0].Key != Other || rows[0].Count != 3*MaxKeys-MaxKeys {
		t.Errorf("top URL = %+v, want %s with %d", rows[0], Other, 2*MaxKeys)
	}
}

func TestMerge(t *testing.T) {
	a, b := surge(), surge()
	a.Merge(b)
	if got := a.Summary("", 1).Reasons[1]; got.Count != 58 || got.Request != "POST /xmlrpc.php" {
		t.Errorf("merged method = %+v, want 58 POST /xmlrpc.php", got)
	}
}

// TestScreen pins the screen of `gearshift top` (docs/reasons.md shows it).
func TestScreen(t *testing.T) {
	now := time.Date(2025, 3, 14, 3, 12, 5, 0, time.UTC)
	for b := By(0); b < numBy; b++ {
		var buf bytes.Buffer
		if err := WriteScreen(&buf, surge().View("site", b, 20, 5), now, false); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, "screen-"+b.String()+".txt", buf.Bytes())
	}
}

func TestParseBy(t *testing.T) {
	for b := By(0); b < numBy; b++ {
		if got, err := ParseBy(b.String()); err != nil || got != b {
			t.Errorf("ParseBy(%q) = %v, %v", b, got, err)
		}
	}
	if _, err := ParseBy("host"); err == nil {
		t.Error("ParseBy(host): no error")
	}
}

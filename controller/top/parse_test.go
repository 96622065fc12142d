package top

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseLog(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "varnishlog.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Request
	if err := parseLog(f, func(q Request) { got = append(got, q) }); err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Method: "GET", URL: "/?s=*&paged=*", Reason: "miss", Client: "127.0.0.1", reasons: 1},
		{Method: "POST", URL: "/xmlrpc.php", Reason: "method", Client: "203.0.113.7", reasons: 1},
		{Method: "GET", URL: "/news/today", Reason: "session", Detail: "cookie=_my_tracker", Cookie: "_my_tracker", Client: "203.0.113.8", reasons: 2},
		{Method: "GET", URL: "/chat", Client: "127.0.0.1"},
		{Method: "GET", URL: "/shop?add=*", Reason: "set_cookie", Detail: "cookie=plugin_visit", Cookie: "plugin_visit", Client: "::1", reasons: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseLog:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseLogLongLines(t *testing.T) {
	long := "/" + strings.Repeat("a", 3*maxLine)
	in := "* << BeReq >> 1\n- BereqURL " + long + "\n- VCL_Log gearshift-reason: miss\n\n"
	var got []Request
	if err := parseLog(strings.NewReader(in), func(q Request) { got = append(got, q) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Reason != "miss" || len(got[0].URL) > maxURL {
		t.Errorf("got %+v, want one miss with a URL of at most %d bytes", got, maxURL)
	}
}

func TestCollapseURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/?s=foo", "/?s=*"},
		{"/a?x&y=1&y=2", "/a?x&y=*&y=*"},
		{"/p?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9", "/p?a=*&b=*&c=*&d=*&e=*&f=*&g=*&h=*&…"},
		{"/" + strings.Repeat("x", 300), "/" + strings.Repeat("x", maxURL-4) + "…"},
	} {
		if got := collapseURL(tc.in); got != tc.want {
			t.Errorf("collapseURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClientOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"203.0.113.7, 127.0.0.1", "203.0.113.7"},
		{"10.0.0.1, 203.0.113.7", "203.0.113.7"},
		{"::ffff:127.0.0.1, ::1", "::1"},
		{"junk", Unknown},
	} {
		if got := clientOf(tc.in); got != tc.want {
			t.Errorf("clientOf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Heavy's ask to the daemon for a guest page, answered no, is a
// transaction of its own before the retry at the backend: not counted; the
// retry and a shared guest copy are.
func TestParseLogLeavesOutGuestAsks(t *testing.T) {
	in := "* << BeReq >> 5\n- BereqMethod GET\n- BereqURL /shop\n- VCL_Log gearshift-guest: no\n\n" +
		"* << BeReq >> 6\n- BereqMethod GET\n- BereqURL /shop\n- VCL_Log gearshift-reason: set_cookie cookie=PHPSESSID\n\n" +
		"* << BeReq >> 7\n- BereqMethod GET\n- BereqURL /article\n- VCL_Log gearshift-reason: guest\n\n"
	var got []string
	if err := parseLog(strings.NewReader(in), func(q Request) { got = append(got, q.URL+" "+q.Reason) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/shop set_cookie", "/article guest"}; !slices.Equal(got, want) {
		t.Errorf("parseLog = %q, want %q", got, want)
	}
}

// TestParseLogOverBudget: a client request refused for its budget is read
// from its own transaction, the client taken from the record (the one the
// budget counted, behind a proxy), not the peer.
func TestParseLogOverBudget(t *testing.T) {
	in := "*   << Request  >> 32770\n" +
		"-   ReqMethod      POST\n" +
		"-   ReqURL         /?s=abc123\n" +
		"-   ReqHeader      X-Forwarded-For: 10.0.0.1, 192.0.2.5, 127.0.0.1\n" +
		"-   VCL_Log        gearshift-reason: over_budget client=192.0.2.5\n" +
		"-   ReqURL         /?s=abc123\n\n"
	var got []Request
	if err := parseLog(strings.NewReader(in), func(q Request) { got = append(got, q) }); err != nil {
		t.Fatal(err)
	}
	want := []Request{{Method: "POST", URL: "/?s=*", Reason: OverBudget, Detail: "client=192.0.2.5", Client: "192.0.2.5", reasons: 1}}
	if !slices.Equal(got, want) {
		t.Errorf("parseLog:\n got %+v\nwant %+v", got, want)
	}
}

package profiles

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func TestCacheURL(t *testing.T) {
	p := DefaultOptions()
	off := DefaultOptions()
	off.DropQueryParams, off.SortQuery = nil, false
	unsorted := DefaultOptions()
	unsorted.SortQuery = false
	for _, tc := range []struct {
		opts     *Options
		uri, out string
	}{
		{&p, "/p", "/p"},
		{&p, "/p?fbclid=1", "/p"},
		{&p, "/p?fbclid=1&fbclid=2", "/p"},
		{&p, "/p?b=1&fbclid=IwAR3x&a=2", "/p?a=2&b=1"},
		{&p, "/p?utm_source=fb&utm_campaign=x&id=7", "/p?id=7"},
		{&p, "/p?utm=1&fbclid_x=2&xgclid=3", "/p?fbclid_x=2&utm=1&xgclid=3"},
		{&p, "/p?", "/p"},
		{&p, "/p?a=1&&b=2", "/p?a=1&b=2"},
		{&p, "/p?q=a?fbclid=1", "/p?q=a?fbclid=1"},
		{&p, "/p?fbclid", "/p"},
		{&p, "/p?s=x&_ga=2.1&_gl=1*abc", "/p?s=x"},
		{&unsorted, "/p?b=1&fbclid=1&a=2", "/p?b=1&a=2"},
		{&unsorted, "/p?b=1&a=2", "/p?b=1&a=2"},
		{&off, "/p?b=1&fbclid=1&a=2", "/p?b=1&fbclid=1&a=2"},
	} {
		if got := tc.opts.CacheURL(tc.uri); got != tc.out {
			t.Errorf("CacheURL(%q) = %q, want %q", tc.uri, got, tc.out)
		}
	}
}

func TestQueryGlob(t *testing.T) {
	for _, tc := range []struct {
		glob, name string
		match      bool
	}{
		{"utm_*", "utm_source", true},
		{"utm_*", "utm_", true},
		{"utm_*", "utm", false},
		{"utm_*", "xutm_source", false},
		{"fbclid", "fbclid", true},
		{"fbclid", "fbclid_x", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"*_id", "session_id", true},
	} {
		re, err := QueryGlobRegex(tc.glob)
		if err != nil {
			t.Fatal(err)
		}
		if got := regexp.MustCompile("^(?:" + re + ")$").MatchString(tc.name); got != tc.match {
			t.Errorf("regex of %q on %q = %v, want %v", tc.glob, tc.name, got, tc.match)
		}
		if got := queryGlobMatch(tc.glob, tc.name); got != tc.match {
			t.Errorf("queryGlobMatch(%q, %q) = %v, want %v", tc.glob, tc.name, got, tc.match)
		}
	}
	for _, bad := range []string{"", "a&b", "a=b", "a b", "a#", `a"`} {
		if _, err := QueryGlobRegex(bad); err == nil {
			t.Errorf("QueryGlobRegex(%q) accepted", bad)
		}
	}
}

// testQuery: the tracking parameters of drop_query_params never split the
// cache or reach the backend, in any gear; the rest share one copy in any
// order; parameters that only look alike stay; PURGE and a ban made from
// Options.CacheURL reach every variant.
func testQuery(t *testing.T, g *gears, o *origin, gear string) {
	get := func(path string) reply {
		t.Helper()
		return g.do(t, req{gear: gear, path: path})
	}
	base := "/g/" + gear + "/query?cc=max-age%3D600"
	first, again := "MISS", "HIT"
	if gear == "light" {
		first, again = "PASS", "PASS" // light keeps its copy for the other gears
	}
	get(base+"&fbclid=IwAR1").want(t, first, "uri="+base+" hit=1")
	wantCount(t, o, base+"&fbclid=IwAR1", 0)
	var params []string
	for _, name := range DefaultDropQueryParams() {
		params = append(params, strings.ReplaceAll(name, "*", "campaign")+"=v"+name)
	}
	for i, p := range params {
		get(base+"&"+p).want(t, again, "")
		// All of them at once, in another place of the query.
		if i == len(params)-1 {
			get(strings.Replace(base, "?", "?"+strings.Join(params, "&")+"&", 1)).want(t, again, "")
		}
	}
	get(base).want(t, again, "")
	if gear == "light" {
		wantCount(t, o, base, len(params)+3)
	} else {
		wantCount(t, o, base, 1)
	}

	// Sorted for the key; the backend gets the order the client sent.
	sorted := "/g/" + gear + "/sorted?cc=max-age%3D600&b=1&a=2"
	get(sorted).want(t, first, "uri="+sorted+" ")
	get("/g/"+gear+"/sorted?a=2&b=1&cc=max-age%3D600").want(t, again, "")
	if r := g.raw(t, gear, "GET /g/"+gear+"/lone? HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusOK {
		t.Errorf("GET /lone?: status %d", r.status)
	}
	get("/g/"+gear+"/lone").want(t, again, "")

	// Names that only look like tracking parameters are the page's own.
	for _, p := range []string{"utm=1", "fbclid_x=1", "xgclid=1", "gclid2=1"} {
		u := base + "&" + p
		get(u).want(t, first, "uri="+u+" ")
	}
	if gear == "light" {
		return
	}

	// PURGE by any variant reaches the copy.
	purge := func(path string) {
		t.Helper()
		if r := g.do(t, req{gear: gear, method: "PURGE", path: path}); r.status != http.StatusOK {
			t.Fatalf("PURGE %s: status %d %q", path, r.status, r.body)
		}
	}
	purge(base + "&gclid=x")
	g.purged(t, req{gear: gear, path: base + "&fbclid=after-purge"}, "hit=2")
	purge("/g/" + gear + "/sorted?a=2&cc=max-age%3D600&b=1&utm_medium=x")
	g.purged(t, req{gear: gear, path: sorted}, "hit=2")
	// gearshift purge: a ban on Options.CacheURL, as Varnish keys it.
	opts := DefaultOptions()
	key := opts.CacheURL("/g/" + gear + "/sorted?utm_source=x&b=1&cc=max-age%3D600&a=2")
	if out, err := g.v.Adm("ban", "obj.http.X-Gs-Url", "==", key); err != nil {
		t.Fatalf("ban %s: %v %s", key, err, out)
	}
	get(sorted).want(t, "MISS", "hit=3")
}

// testKeepWarm: light and moderate store what heavy would (keep_warm),
// serve it to nobody, and heavy serves it at once: no backend request at
// the shift.
func testKeepWarm(t *testing.T, g *gears, o *origin) {
	for _, from := range []string{"light", "moderate"} {
		u := fmt.Sprintf("/g/keepwarm/%s?cc=%s&exp=past", from, url.QueryEscape("no-store, no-cache, must-revalidate"))
		u = strings.ReplaceAll(u, "no-store%2C+", "") // PHP's no-cache without no-store
		get := func(gear string) reply {
			t.Helper()
			return g.do(t, req{gear: gear, path: u})
		}
		want := "MISS"
		if from == "light" {
			want = "PASS"
		}
		get(from).want(t, want, "hit=1")
		get(from).want(t, "PASS", "hit=2")
		get(from).want(t, "PASS", "hit=3")
		get("heavy").want(t, "HIT", "hit=1")
		get("heavy").want(t, "HIT", "hit=1")
		wantCount(t, o, u, 3)
	}
	// What moderate's rules cache, light stores as moderate would: moderate
	// serves it at once too.
	u := "/g/keepwarm/cacheable?cc=max-age%3D600"
	g.do(t, req{gear: "light", path: u}).want(t, "PASS", "hit=1")
	g.do(t, req{gear: "moderate", path: u}).want(t, "HIT", "hit=1")
	g.do(t, req{gear: "heavy", path: u}).want(t, "HIT", "hit=1")
	// What heavy would not share is not kept either: a response that sets
	// a cookie, a private one, a no-store one.
	for _, q := range []string{"sc=cart%3D1", "cc=private", "cc=no-store"} {
		u := "/g/keepwarm/never?" + q
		g.do(t, req{gear: "light", path: u})
		g.do(t, req{gear: "heavy", path: u}).want(t, "PASS", "hit=2")
	}
}

package ban

import (
	"slices"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/profiles"
)

func TestParseBan(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
		err  string
	}{
		{"req.url ~ ^/news/", []string{"req.url", "~", "^/news/"}, ""},
		{"  obj.http.X-Gs-Host == example.com   &&  req.url !~ \\.css$ ", []string{"obj.http.X-Gs-Host", "==", "example.com", "&&", "req.url", "!~", `\.css$`}, ""},
		{"", nil, "no ban expression"},
		{"req.url", nil, `ban condition "req.url" is incomplete`},
		{"req.url ~ a req.http.host == b", nil, `ban conditions are joined by &&, got "req.http.host"`},
		{"req.url ~ a &&", nil, "ends with &&"},
		{"req.url ~ a && req.url", nil, `ban condition "req.url" is incomplete`},
		{"req.url ~ a\x00b", nil, `holds a control character ('\x00' at byte 11)`},
	} {
		got, err := Parse(tc.expr)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Parse(%q) = %q, %v; want an error with %q", tc.expr, got, err, tc.err)
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
}

func TestPurgeBan(t *testing.T) {
	for _, tc := range []struct {
		url       string
		normalize bool
		want      string
		err       string
	}{
		{"http://WWW.Example.com:8080/a/b?x=1&y=2", true, "obj.http.X-Gs-Host == example.com && obj.http.X-Gs-Url == /a/b?x=1&y=2", ""},
		{"https://Example.com:8443/", false, "obj.http.X-Gs-Host == Example.com:8443 && obj.http.X-Gs-Url == /", ""},
		{"https://example.com", true, "obj.http.X-Gs-Host == example.com && obj.http.X-Gs-Url == /", ""},
		{"/relative/path", true, "", "is not a URL to purge"},
		{"ftp://example.com/x", true, "", "is not a URL to purge"},
		{"http://www./x", true, "", "has no host to purge"},
		{"http://example.com/?q=a b", true, "obj.http.X-Gs-Host == example.com && obj.http.X-Gs-Url == /?q=a%20b", ""},
		{"http://example.com/a%20b c", true, "obj.http.X-Gs-Host == example.com && obj.http.X-Gs-Url == /a%20b%20c", ""}, // as a client sends it
		// The URL as the cache key holds it: without tracking parameters, sorted.
		{"http://example.com/p?utm_source=x&b=2&fbclid=1&a=1", true, "obj.http.X-Gs-Host == example.com && obj.http.X-Gs-Url == /p?a=1&b=2", ""},
		{"http://example.com/p?fbclid=1", true, "obj.http.X-Gs-Host == example.com && obj.http.X-Gs-Url == /p", ""},
	} {
		p := profiles.DefaultOptions()
		p.NormalizeHost = tc.normalize
		got, err := Purge(tc.url, &p)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Purge(%q) = %q, %v; want an error with %q", tc.url, got, err, tc.err)
		case tc.err == "" && (err != nil || strings.Join(got, " ") != tc.want):
			t.Errorf("Purge(%q) = %q, %v; want %q", tc.url, strings.Join(got, " "), err, tc.want)
		}
	}
}

func TestTagBan(t *testing.T) {
	words, err := Tags([]string{"product-42", "cat.7"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(words, " "), `obj.http.xkey ~ (^|[[:space:],])(product-42|cat\.7)([[:space:],]|$)`; got != want {
		t.Errorf("Tags = %q, want %q", got, want)
	}
	for _, bad := range [][]string{nil, {""}, {"a b"}, {"x&&req.url"}, {"ok", "tab\t"}} {
		if _, err := Tags(bad); err == nil {
			t.Errorf("Tags(%q) took it", bad)
		}
	}
}

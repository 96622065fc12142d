package ban

import (
	"strings"
	"testing"
	"unicode"

	"github.com/gearshift/gearshift/profiles"
)

// FuzzBan: whatever an operator types, Parse and Purge either
// refuse it or return ban words that are each one word of the admin
// protocol (no white space, so no newline that could end the command
// early), in conditions of three joined by &&.
func FuzzBan(f *testing.F) {
	for _, s := range []string{
		"req.url ~ ^/news/", "obj.http.X-Gs-Host == example.com && req.url ~ /", "req.url ~", "a b c &&",
		"a b c || d e f", "http://example.com/a b?q=1", "https://www.Example.COM/news/?s=x%0a", "http://h\n/x",
		"req.url ~ ^/\nban.list", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(what string, words []string) {
			if len(words)%4 != 3 {
				t.Fatalf("%s(%q) = %q: %d words, want conditions of three joined by &&", what, s, words, len(words))
			}
			for i, w := range words {
				if w == "" || strings.IndexFunc(w, unicode.IsSpace) >= 0 || strings.ContainsAny(w, "\x00\r\n") {
					t.Fatalf("%s(%q): word %d %q is not one word", what, s, i, w)
				}
				if i%4 == 3 && w != "&&" {
					t.Fatalf("%s(%q): word %d is %q, want &&", what, s, i, w)
				}
			}
		}
		if words, err := Parse(s); err == nil {
			check("Parse", words)
		}
		for _, normalize := range []bool{false, true} {
			p := profiles.DefaultOptions()
			p.NormalizeHost = normalize
			if words, err := Purge(s, &p); err == nil {
				check("Purge", words)
			}
		}
	})
}

// Package ban makes and sends Varnish bans: an operator's expression,
// the purge of a URL or of a tag, to every target of the config at once.
package ban

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/profiles"
)

// Result is one target's answer to a ban.
type Result struct {
	Target string // the admin address
	Err    error  // nil: the target took the ban; a *varnishadm.CLIError when it refused it
}

// Parse splits a ban expression (Varnish's syntax: field operator
// argument, joined by &&) into the words of the ban command. It refuses
// what cannot be a ban, naming the problem; Varnish judges the rest.
func Parse(expr string) ([]string, error) {
	if i := strings.IndexFunc(expr, func(r rune) bool { return unicode.IsControl(r) && !unicode.IsSpace(r) }); i >= 0 {
		return nil, fmt.Errorf("the ban expression holds a control character (%q at byte %d): type it as text", expr[i], i)
	}
	words := strings.Fields(expr)
	if len(words) == 0 {
		return nil, errors.New("no ban expression: give one such as 'req.url ~ ^/news/' or 'obj.http.X-Gs-Host == example.com'")
	}
	for i := 0; i < len(words); i += 4 {
		cond := words[i:min(i+3, len(words))]
		if len(cond) < 3 {
			return nil, fmt.Errorf("ban condition %q is incomplete: want field, operator and argument, as in 'req.url ~ ^/news/'", strings.Join(cond, " "))
		}
		if i+3 < len(words) && words[i+3] != "&&" {
			return nil, fmt.Errorf("ban conditions are joined by &&, got %q after %q", words[i+3], strings.Join(cond, " "))
		}
		if i+3 == len(words)-1 {
			return nil, errors.New("the ban expression ends with &&: give the condition after it")
		}
	}
	return words, nil
}

// Purge returns the ban words that purge rawURL (http://host/path?query)
// as the profiles' PURGE request does: every variant of the URL on its host,
// both schemes, every session's copy, with or without the tracking
// parameters of drop_query_params and in any order of the query. p is the
// config's profiles block: the host and the URL as the cache key holds
// them.
func Purge(rawURL string, p *profiles.Options) ([]string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not a URL to purge: want http://host/path", rawURL)
	}
	host := u.Host
	if p.NormalizeHost {
		host = strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
	}
	if host == "" {
		return nil, fmt.Errorf("%q has no host to purge: want http://host/path", rawURL)
	}
	// The URL as a client sends it, escaped: no white space, as a ban
	// argument needs.
	return []string{"obj.http.X-Gs-Host", "==", host, "&&", "obj.http.X-Gs-Url", "==", p.CacheURL(escapeSpace(u.RequestURI()))}, nil
}

// tagRE is one tag a backend's xkey or Surrogate-Key header gives a page.
var tagRE = regexp.MustCompile(`^[A-Za-z0-9_.:=%/+-]+$`)

// Tags returns the ban words that drop every page tagged with one of
// tags (the backend's xkey or Surrogate-Key response headers, which the
// profiles keep in the object's xkey header), on any host.
func Tags(tags []string) ([]string, error) {
	if len(tags) == 0 {
		return nil, errors.New("no tag to purge: give one, as in --tag product-42")
	}
	quoted := make([]string, len(tags))
	for i, t := range tags {
		if !tagRE.MatchString(t) {
			return nil, fmt.Errorf("%q is not a tag: letters, digits and _.:=%%/+- only, as the backend's xkey header gives them", t)
		}
		quoted[i] = regexp.QuoteMeta(t)
	}
	return []string{"obj.http.xkey", "~", "(^|[[:space:],])(" + strings.Join(quoted, "|") + ")([[:space:],]|$)"}, nil
}

// escapeSpace percent-encodes the white space Go leaves in a query: a
// request line cannot carry it raw, so the cache holds it encoded.
func escapeSpace(uri string) string {
	var b strings.Builder
	for _, r := range uri {
		if unicode.IsSpace(r) {
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Send sends the ban to every target of cfg at once and returns each
// target's answer, in the order of the config. A ban reaches the cache
// of each Varnish only: a fleet's config lists every node's admin port.
func Send(ctx context.Context, cfg *config.Config, words []string) []Result {
	results := make([]Result, len(cfg.Varnish.Targets))
	var wg sync.WaitGroup
	for i, t := range cfg.Varnish.Targets {
		results[i].Target = t.Admin
		wg.Go(func() {
			c, err := varnishadm.NewFromFile(t.Admin, t.SecretFile)
			if err != nil {
				results[i].Err = fmt.Errorf("varnish target %s: %w", t.Admin, err)
				return
			}
			defer c.Close()
			if d := time.Duration(cfg.Varnish.Timeout); d > 0 {
				c.Timeout = d
			}
			_, results[i].Err = c.Run(ctx, append([]string{"ban"}, words...)...)
		})
	}
	wg.Wait()
	return results
}

package apps

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// gears in the order the tests climb them.
var gears = []string{"light", "moderate", "heavy"}

// stack is a varnishd in front of one application on Apache, all on
// loopback ports and under one temp dir.
type stack struct {
	v       *varnishtest.Varnish
	dir     string // the application's config, data and logs
	url     string // http://<Varnish's address>, the site's address
	backend profiles.Backend
	guest   string // profiles.guest_listen: the test's guest.Server; "": the default
}

func startVarnish(t testing.TB) *stack {
	t.Helper()
	v := varnishtest.Start(t, varnishtest.Config{})
	dir := t.TempDir()
	lampstack.Searchable(t, dir)
	return &stack{v: v, dir: dir, url: "http://" + v.HTTPAddr}
}

// loadDefaults loads gearshift's default profiles with only the backend
// changed (Apache on apachePort), as gs-light, gs-moderate and gs-heavy.
func (st *stack) loadDefaults(t testing.TB, apachePort int) {
	t.Helper()
	st.backend = profiles.BackendAt("127.0.0.1", apachePort)
	lampstack.LoadProfiles(t, st.v, st.config(), "")
}

// config is gearshift's default config with only the backend changed:
// the stack's Apache, once loadDefaults has run.
func (st *stack) config() *config.Config {
	cfg := config.Default()
	cfg.Backend = st.backend
	if st.guest != "" {
		cfg.Profiles.GuestListen = st.guest
		cfg.GuestSecret = testGuestSecret
	}
	return cfg
}

// eachGear runs fn as a subtest for each gear, with that gear's profile in
// use; i is the gear's index, for addresses and names of its own.
func (st *stack) eachGear(t *testing.T, fn func(t *testing.T, gear string, i int)) {
	for i, gear := range gears {
		lampstack.Use(t, st.v, "gs-"+gear)
		if !t.Run(gear, func(t *testing.T) { fn(t, gear, i) }) {
			t.Logf("PHP errors:\n%s", lampstack.LastLines(filepath.Join(st.dir, "php-error.log"), 20))
		}
	}
}

// browser is a new visitor: an empty cookie jar, an address of its own.
func (st *stack) browser(t *testing.T, ip string) *lampstack.Browser {
	return lampstack.NewBrowser(t, st.url, ip)
}

// visitor returns the address of visitor n in gear i, in TEST-NET-1.
func visitor(i, n int) string { return fmt.Sprintf("192.0.2.%d", 10*n+i) }

// cachedRepeat tells whether a repeated anonymous GET must be a HIT in
// gear: moderate keeps what HTTP lets a shared cache keep (httpCacheable),
// heavy anything that sets no cookie and is not no-store (heavyCacheable),
// light no page.
func cachedRepeat(gear string, httpCacheable, heavyCacheable bool) bool {
	switch gear {
	case "moderate":
		return httpCacheable
	case "heavy":
		return heavyCacheable
	}
	return false
}

// checkRepeat fetches path twice with a fresh anonymous browser and
// checks that the second answer is a HIT if cached, and not one
// otherwise; it returns the second page.
func (st *stack) checkRepeat(t *testing.T, ip, path string, cached bool) lampstack.Page {
	t.Helper()
	b := st.browser(t, ip)
	b.Do(http.MethodGet, path, nil, nil)
	p := b.Do(http.MethodGet, path, nil, nil)
	if hit := p.XCache() == "HIT"; hit != cached {
		want := "a HIT"
		if !cached {
			want = "no HIT"
		}
		t.Errorf("repeated anonymous GET %s: X-Cache %s, want %s", path, p.XCache(), want)
	}
	return p
}

// cookieNames lists the names of the cookies b holds for path.
func cookieNames(b *lampstack.Browser, path string) []string {
	var names []string
	for _, kv := range strings.Split(b.CookieHeader(path), "; ") {
		if name, _, ok := strings.Cut(kv, "="); ok {
			names = append(names, name)
		}
	}
	return names
}

// cookieValue is the value of the cookie name b sends for path, "" when
// it has none.
func cookieValue(b *lampstack.Browser, path, name string) string {
	for _, kv := range strings.Split(b.CookieHeader(path), "; ") {
		if n, v, ok := strings.Cut(kv, "="); ok && n == name {
			return v
		}
	}
	return ""
}

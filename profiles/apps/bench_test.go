package apps

import (
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// BenchmarkAppsHome measures each application's anonymous home page
// through each gear of the default profiles, as the tests start them:
// MediaWiki's Main_Page (a CDN may keep it), phpMyAdmin's login form and
// the session site's home page (both start a session and say no-store),
// and the session site in heavy with strip_set_cookies: [PHPSESSID], the
// opt-in that lets heavy share it. One bounded wrk run (5 s, 8
// connections, loopback) per iteration, from an empty cache, reported as
// req/s through Varnish and req/s reaching Apache. One application's
// servers run at a time.
//
//	go test ./profiles/apps -run '^$' -bench AppsHome -benchtime 1x
func BenchmarkAppsHome(b *testing.B) {
	wrk := lampstack.Need(b, "wrk", "wrk")["wrk"]
	for _, app := range []struct {
		name  string
		path  string
		start func(testing.TB) *stack
		strip bool // also heavy with strip_set_cookies: [PHPSESSID]
	}{
		{"mediawiki", "/index.php/Main_Page", func(tb testing.TB) *stack { return startMediaWiki(tb, lampstack.ModPHP).stack }, false},
		{"phpmyadmin", pmaPath, func(tb testing.TB) *stack { return startPhpMyAdmin(tb, lampstack.ModPHP).stack }, false},
		{"sessionsite", "/", func(tb testing.TB) *stack { return startSessionSite(tb, lampstack.ModPHP).stack }, true},
	} {
		b.Run(app.name, func(b *testing.B) {
			st := app.start(b)
			type run struct{ name, vcl string }
			var runs []run
			for _, gear := range gears {
				runs = append(runs, run{gear, "gs-" + gear})
			}
			if app.strip {
				cfg := st.config()
				cfg.Profiles.StripSetCookies = []string{"PHPSESSID"}
				lampstack.LoadProfiles(b, st.v, cfg, "strip")
				runs = append(runs, run{"heavy-strip_set_cookies", "gsstrip-heavy"})
			}
			for _, r := range runs {
				b.Run(r.name, func(b *testing.B) {
					lampstack.Use(b, st.v, r.vcl)
					lampstack.Throughput(b, wrk, st.v, app.path, st.dir)
				})
			}
		})
	}
}

package wordpress

import (
	"testing"

	"github.com/gearshift/gearshift/internal/lampstack"
	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkWordPressHome measures the stock WordPress home page, anonymous,
// through each gear, and moderate without its heuristic freshness
// (moderate_heuristic_ttl: 0): one bounded wrk run (5 s, 8 connections,
// loopback) per iteration, from an empty cache, reported as req/s through
// Varnish and req/s reaching Apache.
//
//	go test ./profiles/wordpress -run '^$' -bench WordPressHome -benchtime 1x
func BenchmarkWordPressHome(b *testing.B) {
	wrk := lampstack.Need(b, "wrk", "wrk")["wrk"]
	st := startStack(b)
	strict := profiles.Default()
	strict.Backend = st.backend
	strict.Profiles.ModerateHeuristicTTL = 0
	st.load(b, strict, "strict")
	for _, tc := range []struct{ name, vcl string }{
		{"light", "gs-light"},
		{"moderate-heuristic-off", "gsstrict-moderate"},
		{"moderate-heuristic-30s", "gs-moderate"},
		{"heavy", "gs-heavy"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st.use(b, tc.vcl)
			lampstack.Throughput(b, wrk, st.v, "/", st.dir)
		})
	}
}

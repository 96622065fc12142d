package wordpress

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkWordPressHome measures the stock WordPress home page, anonymous,
// through each gear, and moderate without its heuristic freshness
// (moderate_heuristic_ttl: 0): one bounded wrk run (5 s, 8 connections,
// loopback) per iteration, reported as req/s through Varnish and req/s
// reaching Apache.
//
//	go test ./profiles/wordpress -run '^$' -bench WordPressHome -benchtime 1x
func BenchmarkWordPressHome(b *testing.B) {
	bin := need(b, "wrk")
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
			for i := 0; i < b.N; i++ {
				before := st.backendRequests(b)
				out, err := exec.Command(bin["wrk"], "-t2", "-c8", "-d5s", st.site.url+"/").CombinedOutput()
				if err != nil {
					b.Fatalf("wrk: %v\n%s", err, out)
				}
				m := wrkRPS.FindSubmatch(out)
				if m == nil {
					b.Fatalf("wrk output without Requests/sec:\n%s", out)
				}
				rps, _ := strconv.ParseFloat(string(m[1]), 64)
				b.ReportMetric(rps, "req/s")
				b.ReportMetric(float64(st.backendRequests(b)-before)/5, "backend-req/s")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

var wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// backendRequests counts the requests Apache has logged.
func (st *stack) backendRequests(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(st.dir, "apache-access.log"))
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

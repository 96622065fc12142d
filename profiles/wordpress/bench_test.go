package wordpress

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// BenchmarkWordPressHome measures the stock WordPress home page on
// mod_php, anonymous, through each gear, moderate without its heuristic
// freshness (moderate_heuristic_ttl: 0), and gearshift 0.2's heavy
// profile beside today's: one bounded wrk run (5 s, 8 connections,
// loopback) per iteration, from an empty cache, reported as req/s through
// Varnish and req/s reaching Apache.
//
//	go test ./profiles/wordpress -run '^$' -bench WordPressHome -benchtime 1x
func BenchmarkWordPressHome(b *testing.B) {
	wrk := lampstack.Need(b, "wrk", "wrk")["wrk"]
	st := startStack(b, lampstack.ModPHP)
	strict := config.Default()
	strict.Backend = st.backend
	strict.Profiles.ModerateHeuristicTTL = 0
	st.load(b, strict, "strict")
	st.loadHeavy02(b, "gs02-heavy")
	for _, tc := range []struct{ name, vcl string }{
		{"light", "gs-light"},
		{"moderate-heuristic-off", "gsstrict-moderate"},
		{"moderate-heuristic-30s", "gs-moderate"},
		{"heavy", "gs-heavy"},
		{"heavy-0.2", "gs02-heavy"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st.use(b, tc.vcl)
			lampstack.Throughput(b, wrk, st.v, "/", st.dir)
		})
	}
}

// heavy02Backend is the backend of testdata/heavy-0.2.vcl.
const heavy02Backend = `    .host = "127.0.0.1";
    .port = "8080";`

// loadHeavy02 loads gearshift 0.2's heavy profile as name, with the
// stack's backend. It is a fixed file, not a render: 0.2's templates are
// gone from the tree (profiles.Render only makes today's rules, from any
// config), so the file is 0.2's own golden heavy.vcl, rendered from 0.2's
// default config, kept byte for byte but for the backend.
func (st *stack) loadHeavy02(tb testing.TB, name string) {
	tb.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", "heavy-0.2.vcl"))
	if err != nil {
		tb.Fatal(err)
	}
	if strings.Count(string(text), heavy02Backend) != 1 {
		tb.Fatalf("testdata/heavy-0.2.vcl: no single backend 127.0.0.1:8080 to point at the stack's Apache")
	}
	vcl := strings.Replace(string(text), heavy02Backend,
		fmt.Sprintf("    .host = %q;\n    .port = \"%d\";", st.backend.Host, st.backend.Port), 1)
	file := filepath.Join(st.v.Dir, name+".vcl")
	if err := os.WriteFile(file, []byte(vcl), 0o644); err != nil {
		tb.Fatal(err)
	}
	if out, err := st.v.Adm("vcl.load", name, file); err != nil {
		tb.Fatalf("vcl.load %s: %v\n%s", name, err, out)
	}
}

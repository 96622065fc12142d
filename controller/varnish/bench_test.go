package varnish

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkCompileAtSwitch measures the naive design, compiling the gear's
// profile when switching (vcl.inline under a new name, then vcl.use);
// gearshift preloads the three profiles and only runs vcl.use
// (BenchmarkSyncAll, controller). It reports p50, p99 and max per switch
// besides ns/op.
func BenchmarkCompileAtSwitch(b *testing.B) {
	v := varnishtest.Start(b, varnishtest.Config{})
	set, err := profiles.Build(testConfig(v).Site())
	if err != nil {
		b.Fatal(err)
	}
	tg, err := DialAdmin(60*time.Second)(v.AdminAddr, v.SecretFile)
	if err != nil {
		b.Fatal(err)
	}
	defer tg.Close()
	ctx := context.Background()
	prev := ""
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := set[state.Heavy]
		if i%2 == 1 {
			p = set[state.Light]
		}
		name := fmt.Sprintf("naive-%s-%d", p.Gear, i)
		start := time.Now()
		if err := tg.VCLInline(ctx, name, p.VCL, "auto"); err != nil {
			b.Fatalf("vcl.inline %s: %v", name, err)
		}
		if err := tg.VCLUse(ctx, name); err != nil {
			b.Fatalf("vcl.use %s: %v", name, err)
		}
		lat = append(lat, time.Since(start))
		// The naive design must also drop what it compiled before, or
		// Varnish accumulates programs; not part of the switch itself.
		if prev != "" {
			if err := tg.VCLDiscard(ctx, prev); err != nil {
				b.Fatalf("vcl.discard %s: %v", prev, err)
			}
		}
		prev = name
	}
	b.StopTimer()
	varnishtest.ReportLatency(b, lat)
}

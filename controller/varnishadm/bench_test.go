package varnishadm

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// The two benchmarks below switch a real varnishd between two loaded, warm
// VCLs: natively over one kept-alive connection, and by running the
// varnishadm program per switch (connect, authenticate, command, exit).
// Compare their ns/op; both also report p50, p99 and max latency.

func loadBenchVCLs(b *testing.B, c *Client) [2]string {
	b.Helper()
	names := [2]string{"bench-a", "bench-b"}
	ctx := context.Background()
	for _, name := range names {
		if err := c.VCLInline(ctx, name, okVCL, "warm"); err != nil {
			b.Fatal(err)
		}
	}
	return names
}

func BenchmarkVCLUse(b *testing.B) {
	_, c := startVarnish(b)
	names := loadBenchVCLs(b, c)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := c.VCLUse(ctx, names[i%2]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	varnishtest.ReportLatency(b, lat)
}

func BenchmarkVCLUseVarnishadmProcess(b *testing.B) {
	if _, err := exec.LookPath("varnishadm"); err != nil {
		b.Skip("varnishadm not on PATH")
	}
	v, c := startVarnish(b)
	names := loadBenchVCLs(b, c)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		out, err := exec.Command("varnishadm", "-T", v.AdminAddr, "-S", v.SecretFile, "vcl.use", names[i%2]).CombinedOutput()
		if err != nil {
			b.Fatalf("varnishadm vcl.use: %v: %s", err, out)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	varnishtest.ReportLatency(b, lat)
}

// BenchmarkVCLLabel moves a label between two warm VCLs while the active
// VCL hands requests to it: a gear switch in label mode. Compare with
// BenchmarkVCLUse.
func BenchmarkVCLLabel(b *testing.B) {
	_, c := startVarnish(b)
	names := loadBenchVCLs(b, c)
	ctx := context.Background()
	if err := c.VCLLabel(ctx, "bench-label", names[0]); err != nil {
		b.Fatal(err)
	}
	if err := c.VCLInline(ctx, "bench-site", okVCL+"sub vcl_recv { return (vcl(bench-label)); }\n", ""); err != nil {
		b.Fatal(err)
	}
	if err := c.VCLUse(ctx, "bench-site"); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := c.VCLLabel(ctx, "bench-label", names[(i+1)%2]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	varnishtest.ReportLatency(b, lat)
}

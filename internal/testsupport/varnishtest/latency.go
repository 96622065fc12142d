package varnishtest

import (
	"slices"
	"testing"
	"time"
)

// ReportLatency reports the p50, p99 and max of lat, in microseconds, as
// metrics of the benchmark b; lat is sorted in place.
func ReportLatency(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := int(p*float64(len(lat)) + 0.5)
		i = min(max(i-1, 0), len(lat)-1)
		return float64(lat[i].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-us")
	b.ReportMetric(pct(0.99), "p99-us")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds())/1e3, "max-us")
}

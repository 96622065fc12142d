package lampstack

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// AccessLog is the file Apache started by StartApache with dir as its Dir
// logs its requests to, one line each.
func AccessLog(dir string) string { return filepath.Join(dir, "apache-access.log") }

// wrkSeconds is how long each wrk run lasts: short enough for a benchmark
// of every gear of several sites to fit in minutes, long enough that the
// first misses of an empty cache weigh nothing.
const wrkSeconds = 5

var (
	wrkRPS    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkErrors = regexp.MustCompile(`(Non-2xx or 3xx responses|Socket errors):.*`)
)

// Throughput measures path through v with the VCL in use, from an empty
// cache: per iteration of b, one bounded wrk run (2 threads, 8
// connections, wrkSeconds, on loopback), reported as req/s answered
// through Varnish and backend-req/s, the requests the Apache started
// with Dir apacheDir logged over the run. wrk is the program's path (see
// Need).
func Throughput(b *testing.B, wrk string, v *varnishtest.Varnish, path, apacheDir string) {
	b.Helper()
	// Every case starts from an empty cache: a copy, or a hit-for-miss
	// marker, left by the VCL measured before would be counted for this one.
	if out, err := v.Adm("ban", "req.url", "~", "."); err != nil {
		b.Fatalf("emptying the cache: %v\n%s", err, out)
	}
	for i := 0; i < b.N; i++ {
		before := countLines(b, AccessLog(apacheDir))
		out, err := exec.Command(wrk, "-t2", "-c8", "-d"+strconv.Itoa(wrkSeconds)+"s", v.URL(path)).CombinedOutput()
		if err != nil {
			b.Fatalf("wrk: %v\n%s", err, out)
		}
		m := wrkRPS.FindSubmatch(out)
		if m == nil {
			b.Fatalf("wrk output without Requests/sec:\n%s", out)
		}
		// A rate of error pages would pass for throughput: say so.
		for _, e := range wrkErrors.FindAll(out, -1) {
			b.Logf("wrk %s: %s", path, e)
		}
		rps, _ := strconv.ParseFloat(string(m[1]), 64)
		b.ReportMetric(rps, "req/s")
		b.ReportMetric(float64(countLines(b, AccessLog(apacheDir))-before)/wrkSeconds, "backend-req/s")
		b.ReportMetric(0, "ns/op")
	}
}

func countLines(tb testing.TB, file string) int {
	tb.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

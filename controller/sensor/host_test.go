package sensor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// TestHostAgainstRealSources reads every optional source at once: a real
// varnishd with a backend, a real Apache's mod_status, a probe of a
// loopback server, an inject file and the cgroup fixture tree.
func TestHostAgainstRealSources(t *testing.T) {
	varnishstatBinary(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))
	defer backend.Close()
	host, port, _ := strings.Cut(strings.TrimPrefix(backend.URL, "http://"), ":")
	v := varnishtest.Start(t, varnishtest.Config{VCL: fmt.Sprintf(
		"vcl 4.1;\nbackend default { .host = %q; .port = %q; }\nsub vcl_recv { return (pass); }\n", host, port)})
	apache := startApache(t, 4)
	inject := filepath.Join(t.TempDir(), "pressure")
	if err := os.WriteFile(inject, []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cgroup, _ := filepath.Abs("testdata/cgroup/limited")

	h, err := NewHost(HostConfig{
		CPUs:    3,
		Varnish: []string{v.WorkDir},
		Sensor: Config{
			Cgroup:       cgroup,
			ApacheStatus: "http://" + apache + "/server-status",
			Probe:        ProbeConfig{URL: backend.URL + "/"},
			InjectFile:   inject,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cpus, from := h.CPUs(); cpus != 3 || from != "cpus in the config" {
		t.Errorf("CPUs = %d from %s, want 3 from the config", cpus, from)
	}
	ctx := context.Background()
	first, err := h.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.Values[state.ClientRPS]; ok || len(first.Problems) != 0 {
		t.Errorf("first sample: values %v, problems %v; want no traffic yet (a baseline), no problems", first.Values, first.Problems)
	}
	for i := 0; i < 20; i++ {
		resp, err := http.Get(v.URL("/"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	time.Sleep(1100 * time.Millisecond) // worker threads publish their counters after the request
	s, err := h.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Problems) != 0 {
		t.Errorf("problems: %v", s.Problems)
	}
	val := func(name string) *float64 {
		if v, ok := s.Values[name]; ok {
			return &v
		}
		return nil
	}
	if c, b := val(state.ClientRPS), val(BackendRPS); c == nil || *c <= 0 || b == nil || *b <= 0 {
		t.Errorf("traffic: client %s, backend %s; want client and backend requests", fmtF(c), fmtF(b))
	}
	// The status request itself, of 4 slots, and maybe a worker still
	// closing the readiness check's connection.
	if r := val(ApacheBusyRatio); r == nil || *r < 0.25 || *r > 0.5 {
		t.Errorf("apache_busy_ratio = %s, want 0.25 or 0.5", fmtF(r))
	}
	if v := val(BackendTTFBMs); v == nil || *v <= 0 {
		t.Errorf("backend_ttfb_ms = %s, want a time", fmtF(v))
	}
	if !eqF(val(Injected), f(7)) {
		t.Errorf("injected = %s, want 7", fmtF(val(Injected)))
	}
	// The fixture's memory.max is 512 MiB; the machine's figures are replaced.
	if s.FromCgroup != cgroup || !eqF(val(PSICPU), f(23.5)) || !eqF(val(PSIMem), f(5.25)) || val(MemAvailablePct) == nil {
		t.Errorf("cgroup figures: from %q, values %v; want the fixture's", s.FromCgroup, s.Values)
	}

	// Sources failing: the sample still comes, without their figures.
	if err := os.WriteFile(inject, []byte("lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	backend.Close()
	var cg *Cgroup
	for _, r := range h.readers {
		if c, ok := r.Reader.(*Cgroup); ok {
			cg = c
		}
	}
	cg.Dir = t.TempDir() // no files: not readable as the fixture was
	if err := os.WriteFile(filepath.Join(cg.Dir, "memory.max"), []byte("lots"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = h.Sample(ctx)
	if err != nil {
		t.Fatalf("Sample with failing sources: %v", err)
	}
	var sources []string
	for _, p := range s.Problems {
		sources = append(sources, p.Source)
	}
	if got, want := strings.Join(sources, ","), "cgroup,inject_file,probe"; got != want {
		t.Errorf("problems from %s, want %s", got, want)
	}
	// A failed cgroup leaves its signals unknown, not the machine's.
	for _, name := range []string{Injected, BackendTTFBMs, PSICPU, PSIMem, MemAvailablePct} {
		if v, ok := s.Values[name]; ok {
			t.Errorf("failed sources left %s = %g", name, v)
		}
	}
	if _, ok := s.Values[state.ClientRPS]; !ok || val(ApacheBusyRatio) == nil || s.CPUs != 3 {
		t.Errorf("the working sources' figures are missing: %+v", s)
	}
}

// BenchmarkHostSample reads every source once per op against real parts:
// varnishd (varnishstat), Apache's mod_status, a probe of Varnish, an
// inject file and the cgroup fixture. Besides the time per sample it
// reports the CPU it costs, this process's and varnishstat's together
// (cpu-us/op): at one sample a second, cpu-us/op / 10^4 is the percentage
// of a core the daemon's sampling takes.
func BenchmarkHostSample(b *testing.B) {
	varnishstatBinary(b)
	v := varnishtest.Start(b, varnishtest.Config{})
	apache := startApache(b, 8)
	inject := filepath.Join(b.TempDir(), "pressure")
	if err := os.WriteFile(inject, []byte("1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cgroup, _ := filepath.Abs("testdata/cgroup/limited")
	h, err := NewHost(HostConfig{
		Varnish: []string{v.WorkDir},
		Sensor: Config{
			Cgroup:       cgroup,
			ApacheStatus: "http://" + apache + "/server-status",
			Probe:        ProbeConfig{URL: v.URL("/")},
			InjectFile:   inject,
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Sample(ctx); err != nil {
		b.Fatal(err)
	}
	before := cpuTime(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := h.Sample(ctx)
		if err != nil || len(s.Problems) > 0 {
			b.Fatalf("Sample: %v, problems %v", err, s.Problems)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-us/op")
}

// cpuTime is the user and system time of this process and its waited-for
// children so far.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		tb.Fatal(err)
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

package system

import (
	"strings"
	"testing"
	"time"
)

// TestSurgeTLSVerdict: the TLS section's verdict says which of hitch and
// PHP took more of the CPUs, whether they were saturated or had room,
// and hitch's cost per new connection, from the runs' figures.
func TestSurgeTLSVerdict(t *testing.T) {
	run := func(name string, ok int, cpu cpuUse) *tlsRun {
		r := &tlsRun{surgeRun: &surgeRun{name: name, surgeAt: 0, surgeEnd: 10 * time.Second, mon: &monitor{}}, cpu: cpu, anonDials: 1000}
		for i := range 100 {
			h := hit{at: time.Duration(i) * 100 * time.Millisecond, latency: time.Millisecond, code: 200}
			if i >= ok {
				h.code = 503
			}
			r.hits = append(r.hits, h)
		}
		return r
	}
	plain := cpuUse{apache: 5 * time.Second, busy: 8 * time.Second, total: 20 * time.Second}
	for _, c := range []struct {
		name  string
		https cpuUse
		want  []string
	}{
		{"hitch saturating", cpuUse{hitch: 6 * time.Second, apache: 4 * time.Second, busy: 19 * time.Second, total: 20 * time.Second},
			[]string{"97.0 % of the anonymous requests were served over https against 100.0 %", "The terminator, not PHP, took more", "saturated", "6.00 ms"}},
		{"room, PHP more", cpuUse{hitch: 2 * time.Second, apache: 4 * time.Second, busy: 10 * time.Second, total: 20 * time.Second},
			[]string{"PHP still took more", "had room (50.0 % busy", "about 1000 new visitors a second", "What TLS cost shows"}},
	} {
		rep := &tlsReport{knobs: surgeKnobs{factor: 10}, cpus: 2, capacity: 10, rate: 100,
			runs: []*tlsRun{run("http", 100, plain), run("https", 97, c.https)}}
		v := rep.verdict()
		for _, w := range c.want {
			if !strings.Contains(v, w) {
				t.Errorf("%s: verdict without %q:\n%s", c.name, w, v)
			}
		}
		if strings.Contains(v, "saturated") == strings.Contains(v, "had room") {
			t.Errorf("%s: verdict says both or neither of saturated and had room:\n%s", c.name, v)
		}
	}
}

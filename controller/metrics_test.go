package controller

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestMetrics(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	since := time.Date(2026, 11, 30, 14, 51, 2, 0, time.UTC)
	st := Status{
		Version: "0.1.0", State: "moderate", Mode: "forced", Since: since, Transitions: 4,
		ConfigError: "states.heavy.enter.load_per_cpu: must be > 0", UptimeSeconds: 3600,
		Sample: &SampleStatus{Time: since.Add(time.Hour), Signals: map[string]*float64{
			"load_per_cpu": f(0.82), "mem_available_pct": f(41.3), "psi_cpu": f(12.5), "psi_mem": nil,
		}},
		Targets: []TargetStatus{
			{Admin: "127.0.0.1:6082", Reachable: true, InSync: true, LastSwitchMS: 0.41},
			{Admin: `10.0.0.2:6082"`, Reachable: false},
		},
	}
	srv := httptest.NewServer(MetricsHandler(func() Status { return st }))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q", ct)
	}
	out := string(body)
	for _, want := range []string{
		`gearshift_build_info{version="0.1.0"} 1`,
		"# HELP gearshift_state The gear in force: 0 light, 1 moderate, 2 heavy.\n# TYPE gearshift_state gauge\ngearshift_state 1\n",
		"gearshift_forced 1\n",
		"# TYPE gearshift_transitions_total counter\ngearshift_transitions_total 4\n",
		"gearshift_state_since_timestamp_seconds 1.796050262e+09\n",
		"gearshift_config_error 1\n",
		"gearshift_load_per_cpu 0.82\n",
		"gearshift_mem_available_percent 41.3\n",
		"gearshift_psi_cpu_percent 12.5\n",
		`gearshift_target_up{admin="127.0.0.1:6082"} 1`,
		`gearshift_target_up{admin="10.0.0.2:6082\""} 0`,
		`gearshift_target_in_sync{admin="127.0.0.1:6082"} 1`,
		`gearshift_target_last_switch_seconds{admin="127.0.0.1:6082"} 0.00041`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gearshift_psi_memory_percent") {
		t.Errorf("psi_memory exported without a figure:\n%s", out)
	}
	if n := strings.Count(out, "# TYPE gearshift_target_up gauge"); n != 1 {
		t.Errorf("gearshift_target_up has %d TYPE lines, want 1", n)
	}

	resp, err = http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
}

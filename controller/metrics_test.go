package controller

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/promtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// scrape GETs the metrics of h in the text format.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type = %q", ct)
	}
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func TestMetricsFromStatus(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	since := time.Date(2026, 11, 30, 14, 51, 2, 0, time.UTC)
	st := api.Status{
		Version: "0.1.0", State: "moderate", Mode: "forced", Since: since, Transitions: 4, LogWriteErrors: 3,
		Sample: &api.SampleStatus{Time: since.Add(time.Hour), Signals: map[string]*float64{
			"load_per_cpu": f(0.82), "mem_available_pct": f(41.3), "psi_cpu": f(12.5), "psi_mem": nil,
			"backend_ttfb_ms": f(250), "db_threads_running": f(41),
		}},
		Targets: []api.TargetStatus{
			{Admin: "127.0.0.1:6082", Reachable: true, InSync: true},
			{Admin: `10.0.0.2:6082"`, Reachable: false},
		},
	}
	named := config.Default()
	named.History.Dir = "" // tests record nothing unless they say so
	named.Sensor.Prometheus.URL = "http://127.0.0.1:9090"
	named.Sensor.Prometheus.Signals = map[string]string{"db_threads_running": "max(mysql_global_status_threads_running)"}
	rules := state.Config{Signals: named.ShownSignals()}
	rules.Bands[state.Moderate].Enter = state.Rule{"load_per_cpu": 0.7, "mem_available_pct": 20}
	rules.Bands[state.Heavy].Stay = state.Rule{"backend_ttfb_ms": 800}
	m := NewMetrics()
	m.watch(func() api.Status { return st }, func() state.Config { return rules })
	m.reloaded(true, since)
	m.reloaded(false, since.Add(time.Minute))
	m.target("127.0.0.1:6082").Switches.Observe(0.0004)
	m.target("127.0.0.1:6082").Errors.Inc()
	m.transition(state.Decision{From: state.Light, Gear: state.Moderate, Changed: true, Cause: state.CauseForced})
	out := scrape(t, m.Handler())

	for _, want := range []string{
		`gearshift_gear{gear="light"} 0`,
		`gearshift_gear{gear="moderate"} 1`,
		`gearshift_gear{gear="heavy"} 0`,
		"gearshift_forced 1\n",
		"gearshift_gear_level 1\n",
		"# HELP gearshift_signal A signal named in the config (sensor.prometheus.signals), by name.\n",
		`gearshift_signal{name="db_threads_running"} 41`,
		"gearshift_gear_since_timestamp_seconds 1.796050262e+09\n",
		"gearshift_sample_timestamp_seconds 1.796053862e+09\n",
		"gearshift_load_per_cpu 0.82\n",
		"gearshift_mem_available_ratio 0.413\n",
		"gearshift_psi_cpu_ratio 0.125\n",
		"gearshift_backend_ttfb_seconds 0.25\n",
		`gearshift_target_up{target="127.0.0.1:6082"} 1`,
		`gearshift_target_up{target="10.0.0.2:6082\""} 0`,
		`gearshift_target_in_sync{target="127.0.0.1:6082"} 1`,
		`gearshift_target_in_sync{target="10.0.0.2:6082\""} 0`,
		`gearshift_target_errors_total{target="127.0.0.1:6082"} 1`,
		`gearshift_switch_duration_seconds_bucket{target="127.0.0.1:6082",le="5e-05"} 0`,
		`gearshift_switch_duration_seconds_bucket{target="127.0.0.1:6082",le="0.0005"} 1`,
		`gearshift_switch_duration_seconds_count{target="127.0.0.1:6082"} 1`,
		`gearshift_transitions_total{cause="forced",from="light",to="moderate"} 1`,
		`gearshift_transitions_total{cause="expired",from="heavy",to="light"} 0`,
		`gearshift_rule_threshold{gear="moderate",rule="enter",signal="load_per_cpu"} 0.7`,
		`gearshift_rule_threshold{gear="moderate",rule="enter",signal="mem_available_pct"} 0.2`,
		`gearshift_rule_threshold{gear="heavy",rule="stay",signal="backend_ttfb_ms"} 0.8`,
		"gearshift_config_last_reload_successful 0\n",
		"gearshift_config_last_reload_timestamp_seconds 1.796050262e+09\n",
		"gearshift_log_write_errors_total 3\n",
		"# TYPE gearshift_log_write_errors_total counter\n",
		"# TYPE gearshift_switch_duration_seconds histogram\n",
		"process_start_time_seconds ",
		"go_goroutines ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`gearshift_build_info\{goversion="go[^"]+",revision="[^"]+",version="` + regexp.QuoteMeta(Version) + `"\} 1\n`).MatchString(out) {
		t.Errorf("metrics lack gearshift_build_info with version %s:\n%s", Version, out)
	}
	for _, absent := range []string{"gearshift_psi_memory_ratio", "gearshift_client_requests_per_second", `transitions_total{cause="auto",from="light",to="light"}`} {
		if strings.Contains(out, absent) {
			t.Errorf("metrics have %s, which they should not:\n%s", absent, out)
		}
	}
	if lint, ok := promtest.Promtool(t, []byte(out), "check", "metrics"); !ok {
		t.Errorf("promtool check metrics:\n%s", lint)
	}

	m.forget("127.0.0.1:6082")
	if out := scrape(t, m.Handler()); strings.Contains(out, `gearshift_target_errors_total{target="127.0.0.1:6082"}`) {
		t.Errorf("a forgotten target keeps its series:\n%s", out)
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
}

// The loop feeds the event metrics: a transition by its cause, each switch
// of a target, each failure of one, each reload, and the rules in force.
func TestMetricsFollowTheLoop(t *testing.T) {
	m := NewMetrics()
	var dead string
	r := newRig(t, func(cfg *config.Config) {
		dead = "127.0.0.1:1" // nothing listens on tcpmux
		cfg.Varnish.Targets = append(cfg.Varnish.Targets, config.Target{Admin: dead, SecretFile: cfg.Varnish.Targets[0].SecretFile})
	}, withMetrics(m))
	live := r.v.AdminAddr
	r.tick(t)
	ctx := context.Background()
	r.c.handle(ctx, request{kind: reqForce, state: state.Heavy})
	r.wantActive(t, state.Heavy)
	r.c.handle(ctx, request{kind: reqAuto})
	r.clock.add(time.Hour)
	r.sensor.set(0)
	r.tick(t) // down from heavy, by the rules
	next := *r.cfg
	next.States.Heavy.Enter = maps.Clone(next.States.Heavy.Enter)
	next.States.Heavy.Enter["load_per_cpu"] = 3
	r.next = func() (*config.Config, error) { return &next, nil }
	if resp := r.c.handle(ctx, request{kind: reqReload}); resp.err != nil {
		t.Fatalf("reload: %v", resp.err)
	}
	out := scrape(t, m.Handler())
	for _, want := range []string{
		`gearshift_transitions_total{cause="forced",from="light",to="heavy"} 1`,
		`gearshift_transitions_total{cause="auto",from="heavy",to="moderate"} 1`,
		// light at the first tick (from varnishd's own VCL), heavy, moderate
		`gearshift_switch_duration_seconds_count{target="` + live + `"} 3`,
		`gearshift_target_errors_total{target="` + dead + `"} `,
		`gearshift_target_up{target="` + dead + `"} 0`,
		`gearshift_target_in_sync{target="` + live + `"} 1`,
		`gearshift_gear{gear="moderate"} 1`,
		`gearshift_rule_threshold{gear="heavy",rule="enter",signal="load_per_cpu"} 3`,
		"gearshift_config_last_reload_successful 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `gearshift_target_errors_total{target="`+dead+`"} 0`) {
		t.Errorf("the dead target's failures are not counted:\n%s", out)
	}
}

// A reload that is refused leaves no series behind for a target only the
// refused config named; a good one drops the series of a target it no
// longer names.
func TestMetricsRefusedReloadAddsNoTarget(t *testing.T) {
	m := NewMetrics()
	r := newRig(t, nil, withMetrics(m))
	r.tick(t)
	ctx := context.Background()
	added := testenv.FreeAddr(t)
	bad := filepath.Join(t.TempDir(), "bad.vcl")
	if err := os.WriteFile(bad, []byte("vcl 4.1;\nthis does not compile;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withAdded := func(vcl string) func() (*config.Config, error) {
		return func() (*config.Config, error) {
			cfg := testConfig(r.v)
			if vcl != "" {
				cfg.Profiles.Heavy.VCLFile = vcl
			}
			cfg.Varnish.Targets = append(cfg.Varnish.Targets, config.Target{Admin: added, SecretFile: r.v.SecretFile})
			return cfg, nil
		}
	}
	series := `{target="` + added + `"}`
	r.next = withAdded(bad)
	if resp := r.c.handle(ctx, request{kind: reqReload}); resp.err == nil {
		t.Fatalf("reload with a broken profile = %+v, want refused", resp.status)
	}
	if out := scrape(t, m.Handler()); strings.Contains(out, series) || !strings.Contains(out, "gearshift_config_last_reload_successful 0\n") {
		t.Fatalf("after a refused reload that added %s, metrics:\n%s", added, out)
	}
	// The same target, accepted, gets its series; dropped, loses them.
	r.next = withAdded("")
	if resp := r.c.handle(ctx, request{kind: reqReload}); resp.err != nil {
		t.Fatalf("reload adding %s: %v", added, resp.err)
	}
	if out := scrape(t, m.Handler()); !strings.Contains(out, "gearshift_target_errors_total"+series) {
		t.Fatalf("after a reload that added %s, metrics lack its errors series:\n%s", added, out)
	}
	r.next = func() (*config.Config, error) { return testConfig(r.v), nil }
	if resp := r.c.handle(ctx, request{kind: reqReload}); resp.err != nil {
		t.Fatalf("reload dropping %s: %v", added, resp.err)
	}
	if out := scrape(t, m.Handler()); strings.Contains(out, series) {
		t.Fatalf("after a reload that dropped %s, metrics:\n%s", added, out)
	}
}

package system

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/promtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// metricsDaemon starts a daemon serving metrics, with the Varnish traffic
// (varnishstat) and backend probe signals on, and returns it with the
// metrics address.
func metricsDaemon(t *testing.T) (*runningDaemon, string) {
	t.Helper()
	v := varnishtest.Start(t, varnishtest.Config{})
	addr := testenv.FreeAddr(t)
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.MetricsListen = addr
		cfg.Varnish.Targets[0].Name = v.WorkDir
		cfg.Sensor.Probe.URL = fmt.Sprintf("http://%s:%d/probe", cfg.Backend.Host, cfg.Backend.Port)
		// A threshold on each signal the dashboard draws, far out of reach.
		cfg.States.Moderate.Stay["client_rps"] = 1e6
		cfg.States.Heavy.Enter["backend_ttfb_ms"] = 1e6
	})
	return d, addr
}

func scrapeMetrics(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// exposedNames are the metric names of a scrape as Prometheus stores
// them: each family's, but a histogram's as its _bucket, _sum and _count
// series, and a summary's with its _sum and _count.
func exposedNames(body string) map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(body, -1) {
		switch m[2] {
		case "histogram":
			names[m[1]+"_bucket"], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true
		case "summary":
			names[m[1]], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true
		default:
			names[m[1]] = true
		}
	}
	return names
}

// contract are the metric families docs/metrics.md names.
var contract = []string{
	"gearshift_gear", "gearshift_transitions_total", "gearshift_switch_duration_seconds_bucket",
	"gearshift_target_up", "gearshift_target_errors_total", "gearshift_config_last_reload_successful",
	"gearshift_config_last_reload_timestamp_seconds", "gearshift_log_write_errors_total", "gearshift_build_info",
	"process_start_time_seconds", "go_goroutines",
}

func TestRunServesMetrics(t *testing.T) {
	d, addr := metricsDaemon(t)
	body, err := scrapeMetrics(addr)
	if err != nil {
		t.Fatalf("scrape metrics_listen %s: %v", addr, err)
	}
	for _, want := range []string{
		`gearshift_gear{gear="light"} 1` + "\n", `gearshift_gear{gear="heavy"} 0` + "\n", "gearshift_forced 0\n",
		`gearshift_target_up{target="` + d.v.AdminAddr + `"} 1` + "\n",
		`gearshift_config_last_reload_successful 1` + "\n",
		`gearshift_rule_threshold{gear="moderate",rule="stay",signal="client_rps"} 1e+06` + "\n",
		`gearshift_rule_threshold{gear="heavy",rule="enter",signal="backend_ttfb_ms"} 1000` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	names := exposedNames(body)
	for _, name := range contract {
		if !names[name] {
			t.Errorf("metrics lack the family %s:\n%s", name, body)
		}
	}
	if out, ok := promtest.Promtool(t, []byte(body), "check", "metrics"); !ok {
		t.Errorf("promtool check metrics:\n%s", out)
	}

	if _, stderr, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, stderr)
	}
	d.eventually("metrics follow force", 10*time.Second, func() error {
		body, err := scrapeMetrics(addr)
		if err != nil {
			return err
		}
		for _, want := range []string{
			`gearshift_gear{gear="heavy"} 1` + "\n", "gearshift_forced 1\n",
			`gearshift_transitions_total{cause="forced",from="light",to="heavy"} 1` + "\n",
			`gearshift_switch_duration_seconds_count{target="` + d.v.AdminAddr + `"} `,
		} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %q yet:\n%s", want, body)
			}
		}
		return nil
	})
}

// A real Prometheus scrapes the daemon and stores every metric it exposes;
// the dashboard's queries and the alert rules name only metrics that exist.
func TestPrometheusScrapesEveryMetric(t *testing.T) {
	d, addr := metricsDaemon(t)
	if _, stderr, code := d.gs("force", "heavy"); code != 0 { // a switch to observe, a transition to count
		t.Fatalf("force heavy: exit %d: %s", code, stderr)
	}
	// Every signal the daemon can read here, so that the scrape below
	// exposes them all (client_rps needs two varnishstat readings).
	var st struct {
		Sample map[string]any `json:"sample"` // signals: a number, or null when unavailable
	}
	d.eventually("signals read", 30*time.Second, func() error {
		out, _, code := d.gs("status", "--json")
		if code != 0 {
			return fmt.Errorf("status exit %d", code)
		}
		st.Sample = nil
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return err
		}
		for _, name := range []string{state.ClientRPS, sensor.BackendTTFBMs} {
			if st.Sample[name] == nil {
				return fmt.Errorf("%s not read yet", name)
			}
		}
		return nil
	})
	body, err := scrapeMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	exposed := exposedNames(body)

	t.Run("prometheus stores every metric", func(t *testing.T) {
		prom := promtest.Start(t, addr)
		var want []string
		for name := range exposed {
			want = append(want, name)
		}
		sort.Strings(want)
		var missing []string
		deadline := time.Now().Add(time.Minute)
		for {
			stored, err := prom.Names()
			if err == nil {
				missing = nil
				for _, name := range want {
					if !slices.Contains(stored, name) {
						missing = append(missing, name)
					}
				}
				if len(missing) == 0 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("after a minute prometheus lacks %v (err %v)", missing, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		res, err := prom.Query(`gearshift_gear == 1`)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || !strings.Contains(strings.Join(keys(res), " "), `gear="heavy"`) {
			t.Errorf("prometheus: gearshift_gear == 1 is %v, want heavy alone", res)
		}
		if len(want) < len(contract) {
			t.Errorf("only %d metrics exposed: %v", len(want), want)
		}
	})

	// A signal unavailable on this machine (PSI on a kernel without it, an
	// unconfigured source) is absent from the scrape by design; the
	// dashboard may still draw it, as long as it is a signal's metric.
	known := map[string]bool{}
	for name := range exposed {
		known[name] = true
	}
	for _, sig := range config.Default().ShownSignals().All() {
		if v, ok := st.Sample[sig.Name]; ok && v == nil && sig.Metric != "" {
			known[sig.Metric] = true
			t.Logf("%s unavailable here: %s accepted unscraped", sig.Name, sig.Metric)
		}
	}

	t.Run("dashboard", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "monitoring", "gearshift-dashboard.json"))
		if err != nil {
			t.Fatal(err)
		}
		var dash map[string]any
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatalf("gearshift-dashboard.json does not parse: %v", err)
		}
		exprs := queries(dash)
		if len(exprs) < 10 {
			t.Fatalf("the dashboard has %d queries, want its panels' and annotations': %v", len(exprs), exprs)
		}
		used := map[string]bool{}
		for _, e := range exprs {
			names := promqlNames(e)
			if len(names) == 0 {
				t.Errorf("query names no metric: %s", e)
			}
			for _, n := range names {
				used[n] = true
				if !known[n] {
					t.Errorf("query names %s, which the daemon does not expose: %s", n, e)
				}
			}
		}
		for _, want := range []string{"gearshift_gear", "gearshift_transitions_total", "gearshift_rule_threshold",
			"gearshift_switch_duration_seconds_bucket", "gearshift_target_up", "gearshift_load_per_cpu"} {
			if !used[want] {
				t.Errorf("the dashboard never queries %s", want)
			}
		}
		annotations, _ := dash["annotations"].(map[string]any)
		if !strings.Contains(fmt.Sprint(annotations), "gearshift_transitions_total") {
			t.Errorf("the dashboard's annotations do not mark the transitions: %v", annotations)
		}
	})

	t.Run("alert rules", func(t *testing.T) {
		rules := filepath.Join("..", "..", "scripts", "monitoring", "gearshift-alerts.yml")
		if out, ok := promtest.Promtool(t, nil, "check", "rules", rules); !ok {
			t.Errorf("promtool check rules:\n%s", out)
		}
		b, err := os.ReadFile(rules)
		if err != nil {
			t.Fatal(err)
		}
		exprs := regexp.MustCompile(`(?m)^\s+expr: (.+)$`).FindAllStringSubmatch(string(b), -1)
		if len(exprs) < 5 {
			t.Fatalf("%d alert expressions, want one per alert", len(exprs))
		}
		for _, m := range exprs {
			for _, n := range promqlNames(m[1]) {
				if !known[n] {
					t.Errorf("alert names %s, which the daemon does not expose: %s", n, m[1])
				}
			}
		}
		// Each alert fires on the series meant to raise it, after its for:.
		if out, ok := promtest.Promtool(t, nil, "test", "rules", filepath.Join("testdata", "monitoring", "alerts.test.yml")); !ok {
			t.Errorf("promtool test rules:\n%s", out)
		}
	})
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// queries collects the PromQL of a Grafana dashboard: every "expr" (panel
// targets, annotations) and the query variables' definitions.
func queries(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && (k == "expr" || (k == "definition" && s != "")) {
				out = append(out, grafanaQuery(s))
				continue
			}
			out = append(out, queries(val)...)
		}
	case []any:
		for _, val := range x {
			out = append(out, queries(val)...)
		}
	}
	sort.Strings(out)
	return out
}

// grafanaQuery is the PromQL of a Grafana query: the selector of a
// label_values(selector, label) variable, or the query itself.
func grafanaQuery(q string) string {
	if m := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`).FindStringSubmatch(q); m != nil {
		return m[1]
	}
	return q
}

var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promqlWords    = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// promqlNames returns the metric names a PromQL expression selects: its
// identifiers that are not functions, keywords, label names (in matchers
// and groupings), strings, durations, or Grafana's $variables.
func promqlNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, " ")
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	e = regexp.MustCompile(`\$\w+`).ReplaceAllString(e, " ")
	var names []string
	for _, m := range promqlIdent.FindAllStringSubmatchIndex(e, -1) {
		word := e[m[0]:m[1]]
		if m[2] >= 0 || promqlWords[strings.ToLower(word)] { // a function call, a keyword
			continue
		}
		if m[0] > 0 && (e[m[0]-1] >= '0' && e[m[0]-1] <= '9' || e[m[0]-1] == '.') { // 1e6, 2.5e-3
			continue
		}
		if !slices.Contains(names, word) {
			names = append(names, word)
		}
	}
	return names
}

func TestPromQLNames(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`gearshift_gear{gear="heavy"} == 1`, "gearshift_gear"},
		{`histogram_quantile(0.99, sum by (le, target) (rate(gearshift_switch_duration_seconds_bucket{instance=~"$instance"}[15m])))`, "gearshift_switch_duration_seconds_bucket"},
		{`(time() - gearshift_gear_since_timestamp_seconds) > 6 * 3600 and on (instance, job) gearshift_gear{gear="heavy"} == 1`, "gearshift_gear_since_timestamp_seconds gearshift_gear"},
		{grafanaQuery(`label_values(gearshift_build_info, instance)`), "gearshift_build_info"},
		{grafanaQuery(`label_values(gearshift_target_up{instance=~"$instance"}, target)`), "gearshift_target_up"},
		{`increase(gearshift_log_write_errors_total[10m]) > 1e3`, "gearshift_log_write_errors_total"},
	} {
		if got := strings.Join(promqlNames(tc.expr), " "); got != tc.want {
			t.Errorf("promqlNames(%s) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

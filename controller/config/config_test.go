package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// fixture writes a secret and a VCL file under a temp dir and returns a
// replacer for {{secret}}, {{vcl}} and {{dir}} in test documents.
func fixture(tb testing.TB) *strings.Replacer {
	tb.Helper()
	dir := tb.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t-do-not-print\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	vcl := filepath.Join(dir, "light.vcl")
	if err := os.WriteFile(vcl, []byte("vcl 4.1;\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	// Not VCL, and what Varnish's compiler would quote back.
	novcl := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(novcl, []byte("s3cr3t-in-a-note\nvcl 4.1;\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	commented := filepath.Join(dir, "commented.vcl")
	if err := os.WriteFile(commented, []byte("# mine\n// still mine\n/* vcl 3.0;\n */ \r\n\tvcl\t4.0 ;\nbackend default none;\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	link := filepath.Join(dir, "secret.vcl")
	if err := os.Symlink(secret, link); err != nil {
		tb.Fatal(err)
	}
	return strings.NewReplacer("{{secret}}", secret, "{{vcl}}", vcl, "{{dir}}", dir,
		"{{novcl}}", novcl, "{{commented}}", commented, "{{secretlink}}", link)
}

// base points the single target at the fixture's secret so that a document
// only needs to say what it tests.
const base = "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}' } ] }\n"

// remote is base with a Varnish on another machine: no counters to read.
const remote = "varnish: { targets: [ { admin: 192.0.2.10:6082, secret_file: '{{secret}}' } ] }\n"

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(t *testing.T, c *Config)
	}{
		{"empty document keeps the defaults", base, func(t *testing.T, c *Config) {
			if c.PollInterval != timefmt.Duration(time.Second) || c.Hysteresis.UpConfirm != 3 || c.Backend.Port != 8080 {
				t.Errorf("defaults lost: %+v", c)
			}
		}},
		{"a rule given replaces its defaults as a whole", base + "states: { heavy: { enter: { load_per_cpu: 2 } } }", func(t *testing.T, c *Config) {
			e := c.States.Heavy.Enter
			if !maps.Equal(e, Rule{"load_per_cpu": 2}) {
				t.Errorf("heavy.enter = %+v, want load_per_cpu 2 alone", e)
			}
			if s := c.States.Heavy.Stay; !maps.Equal(s, Rule{"load_per_cpu": 1.0, "mem_available_pct": 15}) {
				t.Errorf("heavy.stay should keep its defaults, got %+v", s)
			}
			if m := c.States.Moderate.Enter; m["mem_available_pct"] != 20 {
				t.Errorf("moderate.enter should keep its defaults, got %+v", m)
			}
		}},
		{"a rule on memory alone", base + "states: { moderate: { enter: { mem_available_pct: 30 }, stay: { mem_available_pct: 35 } } }", func(t *testing.T, c *Config) {
			if _, ok := c.States.Moderate.Enter["load_per_cpu"]; ok || len(c.States.Moderate.Stay) != 1 {
				t.Errorf("moderate kept a load condition: %+v", c.States.Moderate)
			}
		}},
		{"psi conditions", base + "states: { heavy: { enter: { psi_cpu: 60, load_per_cpu: 1.6 }, stay: { psi_cpu: 40 } } }", func(t *testing.T, c *Config) {
			if p, ok := c.States.Heavy.Enter["psi_cpu"]; !ok || p != 60 {
				t.Errorf("psi_cpu = %v", p)
			}
		}},
		{"a list replaces the default list", base + "profiles: { purge_acl: [10.0.0.0/8, 192.168.1.7, \"fd00::/8\"] }", func(t *testing.T, c *Config) {
			if got := strings.Join(c.Profiles.PurgeACL, ","); got != "10.0.0.0/8,192.168.1.7,fd00::/8" {
				t.Errorf("purge_acl = %s", got)
			}
		}},
		{"durations, booleans and the rest", base + `
poll_interval: 500ms
fast_window: 0s
cpus: 4
hysteresis: { up_confirm: 1, down_window: 0s, min_dwell: 0s }
profiles: { heavy_grace: 0s, normalize_host: false, light: { vcl_file: '{{vcl}}' } }
on_exit: light
log: { level: debug, file: "" }
metrics_listen: 127.0.0.1:9131
`, func(t *testing.T, c *Config) {
			if c.PollInterval != timefmt.Duration(500*time.Millisecond) || c.FastWindow != 0 || c.CPUs != 4 || c.Profiles.NormalizeHost || c.OnExit != "light" {
				t.Errorf("got %+v", c)
			}
		}},
		{"a vcl_file with comments before its declaration", base + "profiles: { moderate: { vcl_file: '{{commented}}' } }", func(t *testing.T, c *Config) {
			if _, err := profiles.Build(c.Site()); err != nil {
				t.Errorf("Build: %v", err)
			}
		}},
		{"two targets", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}' }, { admin: \"[::1]:6083\", secret_file: '{{secret}}' } ] }", func(t *testing.T, c *Config) {
			if len(c.Varnish.Targets) != 2 || c.Varnish.Targets[1].Admin != "[::1]:6083" {
				t.Errorf("targets = %+v", c.Varnish.Targets)
			}
		}},
		{"label mode and a hook", "varnish: { mode: label, targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}' } ] }\nhooks: { on_change: [logger, -t, gearshift], timeout: 5s }", func(t *testing.T, c *Config) {
			if c.Varnish.Mode != ModeLabel || strings.Join(c.Hooks.OnChange, " ") != "logger -t gearshift" || c.Hooks.Timeout != timefmt.Duration(5*time.Second) {
				t.Errorf("varnish.mode %q, hooks %+v", c.Varnish.Mode, c.Hooks)
			}
		}},
		{"the optional sources and rules on their signals", `
varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}', name: /var/lib/varnish/www } ] }
sensor:
  cgroup: system.slice/apache2.service
  apache_status: http://127.0.0.1:8080/server-status?auto
  probe: { url: "http://127.0.0.1:8080/", timeout: 800ms }
  inject_file: /run/gearshift/pressure
hysteresis: { down_traffic_ratio: 0.5 }
states:
  moderate: { enter: { client_rps: 300, apache_busy_ratio: 0.6, injected: -1 }, stay: { client_rps: 200, apache_busy_ratio: 0.4, injected: -2 } }
  heavy: { enter: { client_rps: 600, backend_ttfb_ms: 800, queue_len: 10 }, stay: { client_rps: 400, backend_ttfb_ms: 500, queue_len: 2 } }
`, func(t *testing.T, c *Config) {
			hc := c.SensorConfig()
			if strings.Join(hc.Varnish, ",") != "/var/lib/varnish/www" || hc.Sensor.Cgroup != "system.slice/apache2.service" ||
				hc.Sensor.Probe.Timeout != timefmt.Duration(800*time.Millisecond) || hc.Sensor.InjectFile != "/run/gearshift/pressure" || !strings.HasSuffix(hc.Sensor.ApacheStatus, "?auto") {
				t.Errorf("sensor config = %+v", hc)
			}
			set, err := c.Signals()
			if err != nil {
				t.Fatal(err)
			}
			sc := c.StateConfig(set)
			if sc.DownTrafficRatio != 0.5 || sc.Bands[state.Heavy].Enter["backend_ttfb_ms"] != 800 || sc.Bands[state.Moderate].Enter["injected"] != -1 {
				t.Errorf("state config = %+v", sc)
			}
		}},
		{"the traffic guard is on by default, probe, prometheus and php-fpm timeouts 1s, max_age 30s", base, func(t *testing.T, c *Config) {
			if c.Hysteresis.DownTrafficRatio != 0.6 || c.Sensor.Probe.Timeout != timefmt.Duration(time.Second) || !reflect.DeepEqual(c.Sensor, sensor.Config{
				Probe:      sensor.ProbeConfig{Timeout: timefmt.Duration(time.Second)},
				Prometheus: sensor.PrometheusConfig{Timeout: timefmt.Duration(time.Second), MaxAge: timefmt.Duration(30 * time.Second)},
				PHPFPM:     sensor.PHPFPMConfig{Path: "/status", Timeout: timefmt.Duration(time.Second)},
			}) {
				t.Errorf("defaults: ratio %v, sensor %+v", c.Hysteresis.DownTrafficRatio, c.Sensor)
			}
		}},
		{"signals named by the user", base + `
sensor:
  prometheus:
    url: http://127.0.0.1:9090
    signals:
      db_threads_running: 'max(mysql_global_status_threads_running)'
      fleet_gear: 'max(gearshift_gear_level * gearshift_forced)'
states:
  heavy: { enter: { load_per_cpu: 1.5, db_threads_running: 40, fleet_gear: 2 }, stay: { load_per_cpu: 1, db_threads_running: 20, fleet_gear: 2 } }
`, func(t *testing.T, c *Config) {
			set, err := c.Signals()
			if err != nil {
				t.Fatal(err)
			}
			if s, ok := set.Lookup("fleet_gear"); !ok || !s.Named {
				t.Errorf("fleet_gear in the set: %+v, %v", s, ok)
			}
			if c.States.Heavy.Enter["db_threads_running"] != 40 || c.Sensor.Prometheus.MaxAge != timefmt.Duration(30*time.Second) {
				t.Errorf("states %+v, prometheus %+v", c.States.Heavy, c.Sensor.Prometheus)
			}
			y, err := c.YAML()
			if err != nil || !strings.Contains(string(y), "fleet_gear: 2") || !strings.Contains(string(y), "db_threads_running: max(mysql_global_status_threads_running)") {
				t.Errorf("config show: %v\n%s", err, y)
			}
		}},
		{"anchors and aliases", base + "states:\n  moderate:\n    enter: &r { load_per_cpu: 0.8 }\n    stay: { load_per_cpu: 0.6 }\n  heavy:\n    enter: { load_per_cpu: 1.8 }\n    stay: *r\n", func(t *testing.T, c *Config) {
			if s, ok := c.States.Heavy.Stay["load_per_cpu"]; !ok || s != 0.8 {
				t.Errorf("heavy.stay = %+v", c.States.Heavy.Stay)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := fixture(t).Replace(tc.doc)
			c, err := Parse([]byte(doc))
			if err != nil {
				t.Fatalf("Parse:\n%s\nerror: %v", doc, err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // each a problem line, in order
	}{
		{"unknown top-level key", base + "poll_intervall: 1s", []string{
			"poll_intervall: unknown key (did you mean poll_interval?) (line 2)"}},
		{"unknown nested key", base + "states:\n  heavy:\n    enter: { load: 2 }", []string{
			"states.heavy.enter.load: unknown key (did you mean load_per_cpu?) (line 4)"}},
		{"unknown key in a list item", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}', secret: x } ] }", []string{
			"varnish.targets[0].secret: unknown key (did you mean secret_file?) (line 1)"}},
		{"key given twice", base + "cpus: 1\ncpus: 2", []string{
			"cpus: given twice (first on line 2) (line 3)"}},
		{"bad duration", base + "poll_interval: fast", []string{
			`poll_interval: "fast" is not a duration (use e.g. 90s, 2m, 1h) (line 2)`}},
		{"bad number", base + "cpus: two", []string{`cpus: want a whole number, got "two" (line 2)`}},
		{"bad bool", base + "profiles: { expose_headers: maybe }", []string{`profiles.expose_headers: want true or false, got "maybe" (line 2)`}},
		{"list where a mapping belongs", base + "backend: [a]", []string{"backend: want a mapping of keys, got a list (line 2)"}},
		{"scalar where a list belongs", base + "profiles: { purge_acl: 127.0.0.1 }", []string{`profiles.purge_acl: want a list, got "127.0.0.1" (line 2)`}},
		{"not yaml", "poll_interval: [1s", []string{"not valid YAML: line 1: did not find expected ',' or ']'"}},
		{"heavy below moderate", base + "states: { heavy: { enter: { load_per_cpu: 0.6 }, stay: { load_per_cpu: 0.4 } } }", []string{
			"states.heavy.enter.load_per_cpu: must be > states.moderate.enter.load_per_cpu (0.7), got 0.6 (line 2)"}},
		{"heavy memory above moderate", base + "states: { heavy: { enter: { mem_available_pct: 25 }, stay: { mem_available_pct: 30 } } }", []string{
			"states.heavy.enter.mem_available_pct: must be < states.moderate.enter.mem_available_pct (20), got 25 (line 2)"}},
		{"stay stricter than enter", base + "states: { moderate: { stay: { load_per_cpu: 0.9, mem_available_pct: 15 } } }", []string{
			"states.moderate.stay.load_per_cpu: must be <= states.moderate.enter.load_per_cpu (0.7): a stay rule is looser than its enter rule, got 0.9 (line 2)",
			"states.moderate.stay.mem_available_pct: must be >= states.moderate.enter.mem_available_pct (20): a stay rule is looser than its enter rule, got 15 (line 2)"}},
		{"thresholds out of range", base + "states: { moderate: { enter: { load_per_cpu: -1, mem_available_pct: 120 }, stay: { load_per_cpu: 0 } } }", []string{
			"states.moderate.enter.load_per_cpu: must be > 0, got -1 (line 2)",
			"states.moderate.enter.mem_available_pct: must be a percentage above 0 and at most 100, got 120 (line 2)",
			"states.moderate.stay.load_per_cpu: must be > 0, got 0 (line 2)"}},
		{"poll interval, fast window, cpus", base + "poll_interval: 5m\nfast_window: -1s\ncpus: -2", []string{
			"poll_interval: must be between 10ms and 1m, got 5m (line 2)",
			"fast_window: must not be negative (0 turns the fast signal off), got -1s (line 3)",
			"cpus: must be 0 (detect) or a number of CPUs, got -2 (line 4)"}},
		{"fast window shorter than a poll", base + "poll_interval: 2s\nfast_window: 1s", []string{
			"fast_window: must be 0 (off) or at least poll_interval (2s), got 1s (line 3)"}},
		{"hysteresis", base + "hysteresis: { up_confirm: 0, down_window: -1s, min_dwell: -1m }", []string{
			"hysteresis.up_confirm: must be at least 1 sample, got 0 (line 2)",
			"hysteresis.down_window: must not be negative, got -1s (line 2)",
			"hysteresis.min_dwell: must not be negative, got -1m (line 2)"}},
		{"bad sources", base + `
sensor: { cgroup: ../etc, apache_status: "127.0.0.1/server-status", probe: { url: "ftp://x/", timeout: 0s }, inject_file: pressure }
hysteresis: { down_traffic_ratio: 1.5 }`, []string{
			"hysteresis.down_traffic_ratio: must be between 0 (off) and 1, got 1.5 (line 4)",
			`sensor.cgroup: must be a path under /sys/fs/cgroup or an absolute path, got "../etc" (line 3)`,
			`sensor.apache_status: apache status URL "127.0.0.1/server-status": want http://host[:port]/server-status?auto (line 3)`,
			`sensor.probe.url: probe URL "ftp://x/": want http://host[:port]/path (line 3)`,
			"sensor.probe.timeout: must be positive and at most 30s, got 0s (line 3)",
			`sensor.inject_file: must be an absolute path, got "pressure" (line 3)`}},
		{"bad prometheus block", base + `
sensor:
  prometheus:
    url: localhost:9090
    timeout: 1m
    signals: { load_per_cpu: "x", Db: "y", ok: "" }
states: { heavy: { enter: { db_threads: 40 } } }`, []string{
			"states.heavy.enter.db_threads: unknown key (line 8)",
			`sensor.prometheus.url: prometheus URL "localhost:9090": want http://host:9090 (line 5)`,
			"sensor.prometheus.timeout: must be positive and at most 10s, got 1m (line 6)",
			"sensor.prometheus.signals.Db: a signal name is lowercase letters, digits and _, starting with a letter (line 7)",
			"sensor.prometheus.signals.load_per_cpu: load_per_cpu is a built-in signal: name the query otherwise (line 7)",
			"sensor.prometheus.signals.ok: an empty query: give the PromQL expression of one number (line 7)"}},
		{"a prometheus credentials file missing", base + `
sensor: { prometheus: { url: "http://127.0.0.1:9090", bearer_token_file: /nonexistent/token, signals: { db_threads: "max(x)" } } }`, []string{
			"sensor.prometheus.bearer_token_file: /nonexistent/token does not exist (line 3)"}},
		{"a varnishd name twice", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}', name: www }, { admin: 127.0.0.1:6083, secret_file: '{{secret}}', name: www } ] }", []string{
			"varnish.targets[1].name: www is already varnish.targets[0].name: its traffic would count twice (line 1)"}},
		{"rules on signals whose source is not configured", remote + "states: { moderate: { enter: { client_rps: 300 }, stay: { client_rps: 200 } }, heavy: { enter: { apache_busy_ratio: 0.9, backend_ttfb_ms: 800, injected: 1 } } }", []string{
			"states.moderate.enter.client_rps: needs varnish.targets[].name to be set: client_rps comes from there, and without it the rule can never hold (line 2)",
			"states.moderate.stay.client_rps: needs varnish.targets[].name to be set: client_rps comes from there, and without it the rule can never hold (line 2)",
			"states.heavy.enter.apache_busy_ratio: needs sensor.apache_status to be set: apache_busy_ratio comes from there, and without it the rule can never hold (line 2)",
			"states.heavy.enter.backend_ttfb_ms: needs sensor.probe.url to be set: backend_ttfb_ms comes from there, and without it the rule can never hold (line 2)",
			"states.heavy.enter.injected: needs sensor.inject_file to be set: injected comes from there, and without it the rule can never hold (line 2)"}},
		{"out of range on a source's signal", base + "sensor: { apache_status: 'http://127.0.0.1:8080/server-status?auto' }\nstates: { moderate: { enter: { apache_busy_ratio: 1.5 }, stay: { apache_busy_ratio: 0.5 } } }", []string{
			"states.moderate.enter.apache_busy_ratio: must be above 0 and at most 1, got 1.5 (line 3)"}},
		{"too many targets", "varnish: { targets: [" + manyTargets(MaxTargets+1) + "] }", []string{
			"varnish.targets: 1025 targets, more than the 1024 one gearshift drives (line 1)"}},
		{"no targets", "varnish: { targets: [] }", []string{"varnish.targets: at least one Varnish target is needed (line 1)"}},
		{"bad admin addresses", "varnish: { targets: [ { admin: localhost, secret_file: '{{secret}}' }, { admin: ':6082', secret_file: '{{secret}}' }, { admin: 'h:99999', secret_file: '{{secret}}' } ] }", []string{
			`varnish.targets[0].admin: "localhost" is not host:port (e.g. 127.0.0.1:6082) (line 1)`,
			`varnish.targets[1].admin: ":6082" has no host (e.g. 127.0.0.1:6082) (line 1)`,
			`varnish.targets[2].admin: "h:99999": port must be a number between 1 and 65535 (line 1)`}},
		{"duplicate target", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}' }, { admin: 127.0.0.1:6082, secret_file: '{{secret}}' } ] }", []string{
			"varnish.targets[1].admin: 127.0.0.1:6082 is already varnish.targets[0] (line 1)"}},
		{"missing secret", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{dir}}/nope' } ] }", []string{
			"varnish.targets[0].secret_file: {{dir}}/nope does not exist (line 1)"}},
		{"secret is a directory", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{dir}}' } ] }", []string{
			"varnish.targets[0].secret_file: {{dir}} is not a regular file (line 1)"}},
		{"no secret named", "varnish: { targets: [ { admin: 127.0.0.1:6082 } ] }", []string{
			"varnish.targets[0].secret_file: must name the admin secret file (varnishd -S) (line 1)"}},
		{"backend", base + "backend: { host: '', port: 70000 }", []string{
			"backend.host: must not be empty (line 2)",
			"backend.port: must be between 1 and 65535, got 70000 (line 2)"}},
		{"profile values", base + `profiles:
  static_ttl: 0s
  heavy_grace: -1s
  never_cache: ["^/ok", "(open", "", "^/(?!public/)", 'a"}b', 'say "hi"']
  purge_acl: [127.0.0.1, 10.0.0.0/33, example.com]
  static_extensions: [png, .css]
  session_cookies: ["a b", "wp_*", "[0-9a-f"]
  heavy: { vcl_file: '{{dir}}/missing.vcl' }
`, []string{
			"profiles.static_ttl: must be positive, got 0s (line 3)",
			"profiles.heavy_grace: must not be negative, got -1s (line 4)",
			"profiles.session_cookies[0]: \"a b\": ' ' cannot be part of a cookie name (line 8)",
			"profiles.session_cookies[2]: {{set}} (line 8)",
			"profiles.static_extensions[1]: \".css\" is not a file extension (letters and digits, no dot) (line 7)",
			"profiles.never_cache[1]: \"(open\" is not a valid regex: missing closing ): `(open` (line 5)",
			"profiles.never_cache[2]: an empty pattern would match every path (line 5)",
			"profiles.never_cache[4]: \"a\\\"}b\" cannot go into a VCL string (no newline, no \"}) (line 5)",
			"profiles.purge_acl[1]: \"10.0.0.0/33\" is not an IP address or CIDR (e.g. 10.0.0.0/8) (line 6)",
			"profiles.purge_acl[2]: \"example.com\" is not an IP address or CIDR (e.g. 10.0.0.0/8) (line 6)",
			"profiles.heavy.vcl_file: {{dir}}/missing.vcl does not exist (line 9)"}},
		{"pass_headers and moderate_heuristic_ttl", base + "profiles:\n  moderate_heuristic_ttl: -30s\n  pass_headers: [X-WP-Nonce, 'X Token', '', X_Y]\n", []string{
			"profiles.moderate_heuristic_ttl: must not be negative, got -30s (line 3)",
			`profiles.pass_headers[1]: "X Token" is not a header name (letters, digits and -) (line 4)`,
			`profiles.pass_headers[2]: "" is not a header name (letters, digits and -) (line 4)`,
			`profiles.pass_headers[3]: "X_Y" is not a header name (letters, digits and -) (line 4)`}},
		{"query, stale and backend limits", base + `profiles:
  drop_query_params: [utm_*, "", "a&b", "fb clid"]
  stale_if_error: -1m
  trusted_proxies: [proxy.example]
  websocket_paths: [ws, "/ws/?x"]
backend:
  first_byte_timeout: 0s
  max_connections: -1
  probe: { url: health, interval: 0s, timeout: -1s, window: 65, threshold: 0 }
`, []string{
			`backend.first_byte_timeout: must be positive, got 0s (line 8)`,
			`backend.max_connections: must be 0 (taken from the web server's config) or a number of connections, got -1 (line 9)`,
			`backend.probe.url: "health" is not a path such as /health ("" turns the probe off) (line 10)`,
			`backend.probe.interval: must be positive, got 0s (line 10)`,
			`backend.probe.timeout: must be positive, got -1s (line 10)`,
			`backend.probe.window: must be between 1 and 64 probes, got 65 (line 10)`,
			`backend.probe.threshold: must be between 1 and backend.probe.window (65), got 0 (line 10)`,
			`profiles.stale_if_error: must not be negative, got -1m (line 4)`,
			`profiles.drop_query_params[1]: empty parameter name (line 3)`,
			`profiles.drop_query_params[2]: "a&b": '&' cannot be part of a query parameter name as a URL carries it (line 3)`,
			`profiles.drop_query_params[3]: "fb clid": ' ' cannot be part of a query parameter name as a URL carries it (line 3)`,
			`profiles.trusted_proxies[0]: "proxy.example" is not an IP address or CIDR (e.g. 10.0.0.0/8) (line 5)`,
			`profiles.websocket_paths[0]: "ws" is not a path prefix such as /ws/ (line 6)`,
			`profiles.websocket_paths[1]: "/ws/?x" is not a path prefix such as /ws/ (line 6)`}},
		{"guest pages", base + "profiles: { guest_pages: yes, guest_listen: localhost }", []string{
			`profiles.guest_pages: must be auto or off, got "yes" (line 2)`}},
		{"soft purge", base + "profiles: { soft_purge: moderate }", []string{
			`profiles.soft_purge: must be heavy, always or never, got "moderate" (line 2)`}},
		{"client budget", base + "profiles: { client_budget: { rate: -1, burst: 5 } }", []string{
			`profiles.client_budget.rate: must be a number of requests a second, 0 (no budget) or more, got -1 (line 2)`}},
		{"client budget burst", base + "profiles: { client_budget: { rate: 5, burst: 0 } }", []string{
			`profiles.client_budget.burst: must be 1 or more requests with a rate above 0, got 0 (line 2)`}},
		{"guest listener", base + "profiles: { guest_listen: localhost }", []string{
			`profiles.guest_listen: "localhost" is not an IP address and port (e.g. 127.0.0.1:6089) (line 2)`}},
		{"vcl_file is the admin secret", base + "profiles: { heavy: { vcl_file: '{{secret}}' } }", []string{
			"profiles.heavy.vcl_file: {{secret}} is the admin secret of varnish.targets[0], not a VCL program (line 2)"}},
		{"vcl_file links to the admin secret of another target", "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: '{{vcl}}' }, { admin: 127.0.0.1:6083, secret_file: '{{secret}}' } ] }\nprofiles: { light: { vcl_file: '{{secretlink}}' } }", []string{
			"profiles.light.vcl_file: {{secretlink}} is the admin secret of varnish.targets[1], not a VCL program (line 2)"}},
		{"vcl_file without a VCL declaration", base + "profiles: { moderate: { vcl_file: '{{novcl}}' } }", []string{
			`profiles.moderate.vcl_file: {{novcl}} is not a VCL program: it does not start with "vcl 4.0;" or "vcl 4.1;" (only comments may come first) (line 2)`}},
		{"on_exit, log, paths, metrics", base + "on_exit: stop\nlog: { level: verbose, file: relative.log }\ncontrol: { socket: gs.sock, group: no-such-group-gearshift }\npid_file: ''\nmetrics_listen: 9131", []string{
			`on_exit: must be one of keep, light, moderate, heavy, got "stop" (line 2)`,
			`control.socket: must be an absolute path, got "gs.sock" (line 4)`,
			`log.file: must be an absolute path, got "relative.log" (line 3)`,
			`log.level: must be one of debug, info, warn, error, got "verbose" (line 3)`,
			`pid_file: must not be empty (line 5)`,
			`metrics_listen: "9131" is not host:port (e.g. 127.0.0.1:6082) (or "" for no metrics) (line 6)`,
			`control.group: no group "no-such-group-gearshift" on this machine (line 4)`}},
		{"varnish mode", "varnish: { mode: labels, targets: [ { admin: 127.0.0.1:6082, secret_file: '{{secret}}' } ] }", []string{
			`varnish.mode: must be one of active, label, got "labels" (line 1)`}},
		{"hook command", base + "hooks: { on_change: ['', x], timeout: 0s }", []string{
			"hooks.on_change[0]: must name the command to run (the list is the command and its arguments, run without a shell) (line 2)",
			"hooks.timeout: must be positive, got 0s (line 2)"}},
		{"hook command not in PATH", base + "hooks: { on_change: [no-such-command-gearshift] }", []string{
			`hooks.on_change[0]: "no-such-command-gearshift" not found in PATH (give its absolute path) (line 2)`}},
		{"hook command relative or missing", base + "hooks: { on_change: [bin/notify] }", []string{
			`hooks.on_change[0]: must be an absolute path or a command name found in PATH, got "bin/notify" (line 2)`}},
		{"hook command does not exist", base + "hooks: { on_change: ['{{dir}}/nope.sh', --flag] }", []string{
			`hooks.on_change[0]: {{dir}}/nope.sh does not exist (line 2)`}},
		{"hook command not executable", base + "hooks: { on_change: ['{{vcl}}'] }", []string{
			`hooks.on_change[0]: {{vcl}} is not executable (chmod +x) (line 2)`}},
		{"socket path too long", base + "control: { socket: /" + strings.Repeat("s", 120) + " }", []string{
			"control.socket: is 121 bytes long; a unix socket path must be at most 107 (line 2)"}},
		{"decode and validation problems together", base + "cpus: x\non_exit: never\nhysteresis: { up_confirm: zero }", []string{
			`cpus: want a whole number, got "x" (line 2)`,
			`hysteresis.up_confirm: want a whole number, got "zero" (line 4)`,
			`on_exit: must be one of keep, light, moderate, heavy, got "never" (line 3)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := fixture(t)
			_, err := Parse([]byte(r.Replace(tc.doc)))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error = %v, want an *Error", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			// The glob syntax's own words for a bad glob.
			_, globErr := profiles.CookieGlobRegex("[0-9a-f")
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = strings.ReplaceAll(r.Replace(w), "{{set}}", fmt.Sprint(globErr))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the secret leaked into the error: %v", err)
			}
		})
	}
}

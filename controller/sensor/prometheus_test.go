package sensor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/promtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// prometheusReader returns the reader of queries against url.
func prometheusReader(t *testing.T, url string, queries map[string]string, edit ...func(*PrometheusConfig)) *Prometheus {
	t.Helper()
	cfg := PrometheusConfig{URL: url, Timeout: timefmt.Duration(2 * time.Second), MaxAge: timefmt.Duration(30 * time.Second), Signals: queries}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := NewPrometheus(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// read runs one Read and returns the values it applies and its problems,
// by problem source.
func read(t *testing.T, r Reader) (map[string]float64, map[string]string) {
	t.Helper()
	apply, err := r.Read(context.Background())
	s := Sample{Values: map[string]float64{}}
	if apply != nil {
		apply(&s)
	}
	problems := map[string]string{}
	if err != nil {
		ps, ok := err.(Problems)
		if !ok {
			t.Fatalf("Read error %v is no Problems", err)
		}
		for _, p := range ps {
			problems[p.Source] = p.Err.Error()
		}
	}
	return s.Values, problems
}

// TestPrometheusAgainstPrometheus asks Debian's prometheus, scraping a
// small exporter, what the daemon would: one number per query, the
// reasons when a query gives none, and nothing once the series or the
// server is gone.
func TestPrometheusAgainstPrometheus(t *testing.T) {
	var up atomic.Bool
	up.Store(true)
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "test_threads 42\ntest_multi{a=\"1\"} 1\ntest_multi{a=\"2\"} 2\n")
	}))
	defer exporter.Close()
	prom := promtest.Start(t, strings.TrimPrefix(exporter.URL, "http://"))
	testenv.Eventually(t, "prometheus to scrape the exporter", 30*time.Second, func() bool {
		v, err := prom.Query("test_threads")
		return err == nil && len(v) == 1
	})

	p := prometheusReader(t, prom.URL, map[string]string{
		"threads": "max(test_threads)",
		"two":     "1 + 1",
		"many":    "test_multi",
		"none":    "test_absent_metric",
		"bad":     "max(",
	})
	values, problems := read(t, p)
	if values["threads"] != 42 || values["two"] != 2 || len(values) != 2 {
		t.Errorf("values %v, want threads 42 and two 2 alone", values)
	}
	for name, want := range map[string]string{
		"many": `query "test_multi": 2 series, want one number`,
		"none": `query "test_absent_metric": no series`,
		"bad":  `query "max(" on ` + prom.URL + `: bad_data`,
	} {
		if got := problems["prometheus "+name]; !strings.Contains(got, want) {
			t.Errorf("%s: problem %q, want %q", name, got, want)
		}
	}

	// A failed scrape marks the series stale: the answer is no number,
	// not the last one.
	up.Store(false)
	testenv.Eventually(t, "the stale series to leave the answer", 30*time.Second, func() bool {
		_, problems := read(t, p)
		return strings.Contains(problems["prometheus threads"], "no series")
	})

	prom.Stop()
	values, problems = read(t, p)
	if len(values) != 0 || !strings.Contains(problems["prometheus two"], "connection refused") {
		t.Errorf("with prometheus stopped: values %v, problems %v", values, problems)
	}
}

// TestPrometheusFaults covers what a real Prometheus does not do on
// demand: stall, answer too much or the wrong kind, want credentials.
func TestPrometheusFaults(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	basic := filepath.Join(dir, "basic")
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(token, "s3cret-token\n")
	write(basic, "gearshift:pa55word\n")
	var auth atomic.Value
	auth.Store("")
	var hb strings.Builder
	hb.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := range 100000 {
		if i > 0 {
			hb.WriteString(",")
		}
		fmt.Fprintf(&hb, `{"metric":{"i":"%d"},"value":[1,"1"]}`, i)
	}
	hb.WriteString(`]}}`)
	huge := []byte(hb.String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		switch q := r.FormValue("query"); q {
		case "stall":
			<-r.Context().Done()
		case "huge":
			w.Write(huge) // in one write: the 300 ms are for the reader, not for making it
		case "matrix":
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
		case "nan":
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`)
		default:
			if r.FormValue("lookback_delta") != "30s" {
				http.Error(w, "no lookback_delta", http.StatusBadRequest)
				return
			}
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"7.5"]}]}}`)
		}
	}))
	defer srv.Close()

	p := prometheusReader(t, srv.URL, map[string]string{"stall": "stall", "huge": "huge", "matrix": "matrix", "nan": "nan", "ok": "ok"},
		func(c *PrometheusConfig) {
			c.Timeout = timefmt.Duration(300 * time.Millisecond)
			c.BearerTokenFile = token
		})
	values, problems := read(t, p)
	if len(values) != 1 || values["ok"] != 7.5 {
		t.Errorf("values %v, want ok 7.5 alone", values)
	}
	for name, want := range map[string]string{
		"stall":  "did not answer \"stall\" within 300ms",
		"huge":   "answer larger than 1048576 bytes",
		"matrix": "a matrix, want a scalar or one series",
		"nan":    "NaN is not a number to compare",
	} {
		if got := problems["prometheus "+name]; !strings.Contains(got, want) {
			t.Errorf("%s: problem %q, want %q", name, got, want)
		}
	}
	if got := auth.Load(); got != "Bearer s3cret-token" {
		t.Errorf("Authorization %q, want the token file's bearer token", got)
	}

	// The file is read at every request: a rotated token is used at once.
	write(token, "rotated\n")
	p = prometheusReader(t, srv.URL, map[string]string{"ok": "ok"}, func(c *PrometheusConfig) { c.BearerTokenFile = token })
	read(t, p)
	if got := auth.Load(); got != "Bearer rotated" {
		t.Errorf("Authorization %q after rotation", got)
	}
	p = prometheusReader(t, srv.URL, map[string]string{"ok": "ok"}, func(c *PrometheusConfig) { c.BasicAuthFile = basic })
	read(t, p)
	if got := auth.Load(); got != "Basic Z2VhcnNoaWZ0OnBhNTV3b3Jk" {
		t.Errorf("Authorization %q, want basic auth of gearshift:pa55word", got)
	}

	// A credentials file that is gone: the query is not sent, and the
	// error names the file, never a secret.
	os.Remove(token)
	p = prometheusReader(t, srv.URL, map[string]string{"ok": "ok"}, func(c *PrometheusConfig) { c.BearerTokenFile = token })
	_, problems = read(t, p)
	if got := problems["prometheus ok"]; !strings.Contains(got, "sensor.prometheus.bearer_token_file: cannot read "+token) || strings.Contains(got, "rotated") {
		t.Errorf("problem %q", got)
	}
}

func TestCheckPrometheus(t *testing.T) {
	base := PrometheusConfig{URL: "http://127.0.0.1:9090", Timeout: timefmt.Duration(time.Second), MaxAge: timefmt.Duration(30 * time.Second)}
	for _, tc := range []struct {
		name string
		edit func(*PrometheusConfig)
		want string // key: message
	}{
		{"fine", func(c *PrometheusConfig) { c.Signals = map[string]string{"db_threads": "max(x)"} }, ""},
		{"no url", func(c *PrometheusConfig) { c.URL, c.Signals = "", map[string]string{"a": "b"} }, "sensor.prometheus.url: must be set"},
		{"bad url", func(c *PrometheusConfig) { c.URL, c.Signals = "localhost:9090", map[string]string{"a": "b"} }, `sensor.prometheus.url: prometheus URL "localhost:9090": want http://host:9090`},
		{"no signals", func(c *PrometheusConfig) {}, "sensor.prometheus.signals: name at least one signal"},
		{"built-in name", func(c *PrometheusConfig) { c.Signals = map[string]string{"load_per_cpu": "x"} }, "sensor.prometheus.signals.load_per_cpu: load_per_cpu is a built-in signal"},
		{"source's name", func(c *PrometheusConfig) { c.Signals = map[string]string{"client_rps": "x"} }, "sensor.prometheus.signals.client_rps: client_rps is a built-in signal"},
		{"odd name", func(c *PrometheusConfig) { c.Signals = map[string]string{"DB-threads": "x"} }, "sensor.prometheus.signals.DB-threads: a signal name is lowercase"},
		{"empty query", func(c *PrometheusConfig) { c.Signals = map[string]string{"a": " "} }, "sensor.prometheus.signals.a: an empty query"},
		{"slow", func(c *PrometheusConfig) {
			c.Signals, c.Timeout = map[string]string{"a": "b"}, timefmt.Duration(time.Minute)
		}, "sensor.prometheus.timeout: must be positive and at most 10s, got 1m"},
		{"both credentials", func(c *PrometheusConfig) {
			c.Signals, c.BasicAuthFile, c.BearerTokenFile = map[string]string{"a": "b"}, "/etc/a", "/etc/b"
		}, "sensor.prometheus.bearer_token_file: give basic_auth_file or bearer_token_file, not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			var got []string
			Check(HostConfig{Sensor: Config{Prometheus: c, Probe: ProbeConfig{Timeout: timefmt.Duration(time.Second)}}}, func(key, format string, args ...any) {
				got = append(got, key+": "+fmt.Sprintf(format, args...))
			})
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("problems %q, want one starting %q", got, tc.want)
			}
		})
	}
}

// The user's signals join the set after the built-in ones, by name, as
// signals of their own: a rule key, a status field, gearshift_signal.
func TestNamedSignals(t *testing.T) {
	cfg := HostConfig{Sensor: Config{Prometheus: PrometheusConfig{URL: "http://127.0.0.1:9090",
		Signals: map[string]string{"fleet_gear": "max(gearshift_gear_level)", "db_threads_running": "max(mysql_global_status_threads_running)"}}}}
	set, err := Signals(cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := set.Names()
	if got := strings.Join(names[len(names)-2:], ","); got != "db_threads_running,fleet_gear" {
		t.Errorf("set ends %s", got)
	}
	s, _ := set.Lookup("fleet_gear")
	if !s.Named || s.Source != "sensor.prometheus.url" || !s.Raw() || s.Help != "The answer of the Prometheus query max(gearshift_gear_level)." {
		t.Errorf("fleet_gear = %+v", s)
	}
	if _, unsourced := Unsourced(cfg, "fleet_gear"); unsourced {
		t.Error("a named signal is unsourced")
	}
	if off, _ := Signals(HostConfig{}); off.Len() != len(names)-2 {
		t.Errorf("without the block the set has %d signals, want %d", off.Len(), len(names)-2)
	}
}

// BenchmarkPrometheusRead is the cost of the fleet recipe's two queries per
// poll against Debian's prometheus: the time of a poll's reads, and the
// CPU they take in this process (cpu-us/op; at one poll a second,
// cpu-us/op / 10^4 is the percentage of a core).
func BenchmarkPrometheusRead(b *testing.B) {
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "mysql_global_status_threads_running 3\ngearshift_gear_level 0\ngearshift_forced 0\n")
	}))
	defer exporter.Close()
	prom := promtest.Start(b, strings.TrimPrefix(exporter.URL, "http://"))
	p, err := NewPrometheus(PrometheusConfig{URL: prom.URL, Timeout: timefmt.Duration(time.Second), MaxAge: timefmt.Duration(30 * time.Second),
		Signals: map[string]string{
			"db_threads_running": "max(mysql_global_status_threads_running)",
			"fleet_gear":         "max(gearshift_gear_level * gearshift_forced)",
		}})
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := p.Read(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("prometheus has no answer for the queries after 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	before := cpuTime(b)
	b.ResetTimer()
	for range b.N {
		if _, err := p.Read(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu-us/op")
}

// A redirect to another origin is refused, so the credentials never reach
// it (a 307 used to carry the bearer token along); one within the server
// is followed, credentials and all.
func TestPrometheusRefusesRedirectElsewhere(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stolen atomic.Value
	stolen.Store("")
	var asked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		stolen.Store(r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`)
	}))
	defer elsewhere.Close()
	var auth atomic.Value
	auth.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/moved/api/v1/query":
			auth.Store(r.Header.Get("Authorization"))
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`)
		case strings.HasPrefix(r.URL.Path, "/here/"):
			http.Redirect(w, r, "/moved/api/v1/query", http.StatusTemporaryRedirect)
		default:
			http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	withToken := func(c *PrometheusConfig) { c.BearerTokenFile = token }

	values, problems := read(t, prometheusReader(t, srv.URL, map[string]string{"q": "up"}, withToken))
	want := "refused the redirect to " + elsewhere.URL + "/api/v1/query: it leaves " + srv.URL
	if len(values) != 0 || !strings.Contains(problems["prometheus q"], want) {
		t.Errorf("values %v, problems %v; want the redirect refused: %q", values, problems, want)
	}
	if asked.Load() != 0 || stolen.Load() != "" {
		t.Errorf("the other origin was asked %d times, with Authorization %q", asked.Load(), stolen.Load())
	}

	values, problems = read(t, prometheusReader(t, srv.URL+"/here", map[string]string{"q": "up"}, withToken))
	if values["q"] != 2 || len(problems) != 0 || auth.Load() != "Bearer s3cret-token" {
		t.Errorf("a redirect within the server: values %v, problems %v, Authorization %q", values, problems, auth.Load())
	}
}

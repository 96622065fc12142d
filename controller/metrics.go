package controller

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnish"
)

// SwitchBuckets are the upper bounds, in seconds, of
// gearshift_switch_duration_seconds: a vcl.use on a healthy local Varnish
// takes well under a millisecond, one over a busy network or a loaded
// manager up to seconds.
var SwitchBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5,
}

// Metrics are the daemon's Prometheus metrics (docs/metrics.md): gauges
// read from the controller's status at scrape time, and the counters and
// histograms that the loop updates as events happen. It is safe for
// concurrent use.
type Metrics struct {
	reg          *prometheus.Registry
	transitions  *prometheus.CounterVec
	switches     *prometheus.HistogramVec
	targetErrors *prometheus.CounterVec
	siteShifts   *prometheus.CounterVec
	reloadOK     prometheus.Gauge
	reloadAt     prometheus.Gauge
	view         *statusCollector
}

// NewMetrics returns the metrics of one daemon, with the standard process_*
// and go_* collectors and gearshift_build_info. Until a Controller is
// given them (Options.Metrics) only those and the event metrics are served.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gearshift_transitions_total",
			Help: "Gear changes, by the gear left, the gear entered and their cause (auto: the rules; forced: an operator; expired: a force deadline passing).",
		}, []string{"from", "to", "cause"}),
		switches: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gearshift_switch_duration_seconds",
			Help:    "How long a target took to switch gear (vcl.use, or vcl.label in label mode).",
			Buckets: SwitchBuckets,
		}, []string{"target"}),
		targetErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gearshift_target_errors_total",
			Help: "Failed attempts to bring a target to the gear (unreachable, refused command, timeout).",
		}, []string{"target"}),
		siteShifts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gearshift_site_transitions_total",
			Help: "Gear changes of each site of the config's sites, by from, to and cause.",
		}, []string{"site", "from", "to", "cause"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gearshift_config_last_reload_successful",
			Help: "1 when the last config reload succeeded (or none was tried since start), 0 when it failed and the previous config is in force.",
		}),
		reloadAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gearshift_config_last_reload_timestamp_seconds",
			Help: "When the config in force was loaded: at start, or by the last successful reload.",
		}),
		view: &statusCollector{},
	}
	for _, from := range state.All {
		for _, to := range state.All {
			if from == to {
				continue
			}
			for _, cause := range state.Causes {
				m.transitions.WithLabelValues(from.String(), to.String(), cause)
			}
		}
	}
	m.reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		buildInfo(),
		m.transitions, m.switches, m.targetErrors, m.siteShifts, m.reloadOK, m.reloadAt,
		m.view,
	)
	return m
}

// buildInfo is gearshift_build_info{version,revision,goversion} 1; the
// revision is the VCS commit the binary was built from, "unknown" when the
// build did not record one.
func buildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "gearshift_build_info",
		Help:        "gearshift's version, VCS revision and Go version, as labels; always 1.",
		ConstLabels: prometheus.Labels{"version": Version, "revision": revision, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}

// Handler serves the metrics in the Prometheus exposition formats, on GET
// and HEAD, at any path.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// watch makes the scrape-time gauges read status and rules; both must be
// safe for concurrent use.
func (m *Metrics) watch(status func() api.Status, rules func() state.Config) {
	m.view.src.Store(&statusSource{status: status, rules: rules})
}

// transition counts one gear change.
func (m *Metrics) transition(d state.Decision) {
	cause := d.Cause
	if cause == "" {
		cause = state.CauseAuto
	}
	m.transitions.WithLabelValues(d.From.String(), d.Gear.String(), cause).Inc()
}

// siteTransition counts one gear change of site.
func (m *Metrics) siteTransition(site string, from, to state.Gear, cause string) {
	m.siteShifts.WithLabelValues(site, from.String(), to.String(), cause).Inc()
}

// forgetSite drops the series of a site that is no longer configured.
func (m *Metrics) forgetSite(site string) {
	m.siteShifts.DeletePartialMatch(prometheus.Labels{"site": site})
}

// reloaded records a reload's outcome (ok) at now; the start counts as a
// successful one.
func (m *Metrics) reloaded(ok bool, now time.Time) {
	if !ok {
		m.reloadOK.Set(0)
		return
	}
	m.reloadOK.Set(1)
	m.reloadAt.Set(float64(now.UnixNano()) / 1e9)
}

// target returns the event metrics of the target addr, creating its series
// (at 0) when new. Without metrics (a nil m) they count for no one.
func (m *Metrics) target(addr string) varnish.Metrics {
	if m == nil {
		return varnish.Metrics{Errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "unexported"}), Switches: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "unexported"})}
	}
	return varnish.Metrics{Errors: m.targetErrors.WithLabelValues(addr), Switches: m.switches.WithLabelValues(addr)}
}

// forget drops the series of a target that is no longer configured.
func (m *Metrics) forget(addr string) {
	if m == nil {
		return
	}
	m.targetErrors.DeleteLabelValues(addr)
	m.switches.DeleteLabelValues(addr)
}

// MetricsHandler serves the metrics of a daemon whose status is status and
// whose rules (and signals) are rules, with no event metrics counted: for
// tests and tools that have a status only. status is called once per
// scrape; it must be safe for concurrent use.
func MetricsHandler(status func() api.Status, rules state.Config) http.Handler {
	m := NewMetrics()
	m.watch(status, func() state.Config { return rules })
	return m.Handler()
}

type statusSource struct {
	status func() api.Status
	rules  func() state.Config
}

// statusCollector turns the status into gauges at each scrape. Which
// signals and targets there are changes with the config, so it describes
// no fixed set (an unchecked collector).
type statusCollector struct {
	src atomic.Pointer[statusSource]
}

func (c *statusCollector) Describe(chan<- *prometheus.Desc) {}

var (
	descGear       = prometheus.NewDesc("gearshift_gear", "1 for the gear in force, 0 for the others.", []string{"gear"}, nil)
	descGearLevel  = prometheus.NewDesc("gearshift_gear_level", "The gear in force as a number: "+gearNumbers()+" (max() over a fleet is its highest gear).", nil, nil)
	descSignal     = prometheus.NewDesc("gearshift_signal", "A signal named in the config (sensor.prometheus.signals), by name.", []string{"name"}, nil)
	descForced     = prometheus.NewDesc("gearshift_forced", "1 when an operator pinned the gear (gearshift force), 0 in auto.", nil, nil)
	descGearSince  = prometheus.NewDesc("gearshift_gear_since_timestamp_seconds", "When the gear in force was entered.", nil, nil)
	descSampleTime = prometheus.NewDesc("gearshift_sample_timestamp_seconds", "When the vitals were last read.", nil, nil)
	descTargetUp   = prometheus.NewDesc("gearshift_target_up", "1 when the target's Varnish admin port answers.", []string{"target"}, nil)
	descTargetSync = prometheus.NewDesc("gearshift_target_in_sync", "1 when the target runs the profile of the gear in force.", []string{"target"}, nil)
	descLogErrors  = prometheus.NewDesc("gearshift_log_write_errors_total", "Log lines the daemon could not write (disk full, permissions); log_error in status says why.", nil, nil)
	descHistErrors = prometheus.NewDesc("gearshift_history_write_errors_total", "History records the flight recorder could not write (disk full, permissions); history_error in status says why.", nil, nil)
	descSiteLevel  = prometheus.NewDesc("gearshift_site_gear_level", "Each site's gear as a number: "+gearNumbers()+".", []string{"site"}, nil)
	descSiteForced = prometheus.NewDesc("gearshift_site_forced", "1 while an operator pins each site's gear (gearshift force, with --site or without), 0 in auto.", []string{"site"}, nil)
	descSiteBack   = prometheus.NewDesc("gearshift_site_backend_requests_total", "Backend requests of each site, read from the Varnish log since the daemon started.", []string{"site"}, nil)
	descRuleLimit  = prometheus.NewDesc("gearshift_rule_threshold", "A configured threshold of a gear's enter or stay rule, in the unit of the signal's metric.", []string{"gear", "rule", "signal"}, nil)
)

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	s := src.status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, st := range state.All {
		gauge(descGear, boolean(s.State == st.String()), st.String())
	}
	if st, err := state.Parse(s.State); err == nil {
		gauge(descGearLevel, float64(st))
	}
	gauge(descForced, boolean(s.Mode == "forced"))
	gauge(descGearSince, unix(s.Since))
	ch <- prometheus.MustNewConstMetric(descLogErrors, prometheus.CounterValue, float64(s.LogWriteErrors))
	ch <- prometheus.MustNewConstMetric(descHistErrors, prometheus.CounterValue, float64(s.HistoryWriteErrors))
	rules := src.rules()
	table := rules.Signals.All()
	if smp := s.Sample; smp != nil {
		gauge(descSampleTime, unix(smp.Time))
		for _, sig := range table {
			v, ok := smp.Signal(sig.Name)
			switch {
			case !ok:
			case sig.Named:
				gauge(descSignal, v, sig.Name)
			case sig.Metric != "":
				gauge(prometheus.NewDesc(sig.Metric, sig.Help, nil, nil), sig.MetricValue(v))
			}
		}
	}
	for _, site := range s.Sites {
		if g, err := state.Parse(site.Gear); err == nil {
			gauge(descSiteLevel, float64(g), site.Name)
		}
		gauge(descSiteForced, boolean(site.Mode == "forced"), site.Name)
		ch <- prometheus.MustNewConstMetric(descSiteBack, prometheus.CounterValue, float64(site.BackendRequests), site.Name)
	}
	for _, t := range s.Targets {
		gauge(descTargetUp, boolean(t.Reachable), t.Admin)
		gauge(descTargetSync, boolean(t.InSync), t.Admin)
	}
	for _, st := range state.All {
		b := rules.Bands[st]
		for _, r := range []struct {
			name string
			rule state.Rule
		}{{"enter", b.Enter}, {"stay", b.Stay}} {
			for _, sig := range table {
				if limit, ok := r.rule[sig.Name]; ok {
					gauge(descRuleLimit, sig.MetricValue(limit), st.String(), r.name, sig.Name)
				}
			}
		}
	}
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// gearNumbers says what gearshift_gear_level's values mean: "0 light, 1
// moderate, 2 heavy".
func gearNumbers() string {
	parts := make([]string, len(state.All))
	for i, st := range state.All {
		parts[i] = strconv.Itoa(i) + " " + st.String()
	}
	return strings.Join(parts, ", ")
}

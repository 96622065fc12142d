package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// MetricsHandler serves the daemon's status in the Prometheus text
// exposition format (version 0.0.4) at any path. status is called once per
// scrape; it must be safe for concurrent use (Controller.Status is).
func MetricsHandler(status func() Status) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writeMetrics(w, status())
	})
}

// ServeMetrics serves MetricsHandler on ln until ctx is done.
func ServeMetrics(ctx context.Context, ln net.Listener, status func() Status) error {
	return serveMetrics(ctx, ln, status, metricsTimeouts)
}

func serveMetrics(ctx context.Context, ln net.Listener, status func() Status, timeouts serverTimeouts) error {
	srv := timeouts.apply(&http.Server{Handler: MetricsHandler(status)})
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeMetrics(w io.Writer, s Status) {
	m := metricWriter{w: w}
	st, _ := state.Parse(s.State)
	m.gauge("gearshift_build_info", "gearshift's version, as a label.", 1, "version", s.Version)
	m.gauge("gearshift_state", "The gear in force: "+gearNumbers()+".", float64(st))
	m.gauge("gearshift_forced", "1 when an operator pinned the gear.", boolean(s.Mode == "forced"))
	m.counter("gearshift_transitions_total", "Gear changes since the daemon started.", float64(s.Transitions))
	m.gauge("gearshift_state_since_timestamp_seconds", "When the gear in force was entered.", unix(s.Since))
	m.gauge("gearshift_config_error", "1 when the last reload failed and the previous config is in force.", boolean(s.ConfigError != ""))
	m.counter("gearshift_log_write_errors_total", "Log lines the daemon could not write (disk full, permissions); log_error in status says why.", float64(s.LogWriteErrors))
	m.gauge("gearshift_uptime_seconds", "Seconds since the daemon started.", float64(s.UptimeSeconds))
	if smp := s.Sample; smp != nil {
		m.gauge("gearshift_sample_timestamp_seconds", "When the last sample of the vitals was read.", unix(smp.Time))
		for _, sig := range state.Table() {
			if v, ok := smp.Signal(sig.Name); ok && sig.Metric != "" {
				m.gauge(sig.Metric, sig.Help, sig.MetricValue(v))
			}
		}
	}
	for i, t := range s.Targets {
		first := i == 0
		m.target(first, "gearshift_target_up", "1 when the Varnish admin port answers.", boolean(t.Reachable), t.Admin)
	}
	for i, t := range s.Targets {
		m.target(i == 0, "gearshift_target_in_sync", "1 when the target's active VCL is the gear's profile.", boolean(t.InSync), t.Admin)
	}
	for i, t := range s.Targets {
		m.target(i == 0, "gearshift_target_last_switch_seconds", "Duration of the last vcl.use on the target.", t.LastSwitchMS/1000, t.Admin)
	}
}

type metricWriter struct{ w io.Writer }

func (m metricWriter) header(name, help, kind string) {
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

func (m metricWriter) sample(name string, v float64, labels ...string) {
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(labels[i])
			b.WriteString(`="`)
			b.WriteString(escapeLabel(labels[i+1]))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(m.w, "%s %s\n", b.String(), strconv.FormatFloat(v, 'g', -1, 64))
}

func (m metricWriter) gauge(name, help string, v float64, labels ...string) {
	m.header(name, help, "gauge")
	m.sample(name, v, labels...)
}

func (m metricWriter) counter(name, help string, v float64) {
	m.header(name, help, "counter")
	m.sample(name, v)
}

// target writes one target's sample, with the family's header before the first.
func (m metricWriter) target(first bool, name, help string, v float64, admin string) {
	if first {
		m.header(name, help, "gauge")
	}
	m.sample(name, v, "admin", admin)
}

// escapeLabel escapes a label value as the exposition format requires.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
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

// gearNumbers lists the gears with their number: "0 light, 1 moderate, 2 heavy".
func gearNumbers() string {
	var parts []string
	for _, st := range state.All {
		parts = append(parts, fmt.Sprintf("%d %s", int(st), st))
	}
	return strings.Join(parts, ", ")
}

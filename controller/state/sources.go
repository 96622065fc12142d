package state

import "math"

// Names of the signals the traffic guard and the sensor share.
const (
	ClientRPS       = "client_rps"
	BackendRPS      = "backend_rps"
	BackendFailRPS  = "backend_fail_rps"
	DroppedRPS      = "dropped_rps"
	QueueLen        = "queue_len"
	ApacheBusyRatio = "apache_busy_ratio"
	BackendTTFBMs   = "backend_ttfb_ms"
	Injected        = "injected"
)

// sources are the signals of the optional sources (SPEC section 12): each
// is unavailable unless its source is configured and readable.
var sources = []Signal{
	{
		Name: ClientRPS, Unit: "rps", Direction: Rises, Precision: 0,
		Source:     "varnish.targets[].name",
		Help:       "Varnish client requests per second, summed over the targets with a name.",
		Metric:     "gearshift_client_requests_per_second",
		StatusLine: "varnish", StatusPart: "client",
	},
	{
		Name: BackendRPS, Unit: "rps", Direction: Rises, Precision: 0,
		Source:     "varnish.targets[].name",
		Help:       "Varnish backend requests per second, summed over the targets with a name.",
		Metric:     "gearshift_backend_requests_per_second",
		StatusLine: "varnish", StatusPart: "backend",
	},
	{
		Name: BackendFailRPS, Unit: "rps", Direction: Rises, Precision: 1,
		Source:     "varnish.targets[].name",
		Help:       "Varnish backend connection failures per second.",
		Metric:     "gearshift_backend_failures_per_second",
		StatusLine: "varnish", StatusPart: "backend fail",
	},
	{
		Name: DroppedRPS, Unit: "rps", Direction: Rises, Precision: 1,
		Source:     "varnish.targets[].name",
		Help:       "Varnish sessions dropped for want of a worker thread, per second.",
		Metric:     "gearshift_dropped_sessions_per_second",
		StatusLine: "varnish", StatusPart: "dropped",
	},
	{
		Name: QueueLen, Direction: Rises, Precision: 0,
		Source:     "varnish.targets[].name",
		Help:       "Varnish sessions waiting for a worker thread (MAIN.thread_queue_len).",
		Metric:     "gearshift_queue_length",
		StatusLine: "varnish", StatusPart: "queue",
	},
	{
		Name: ApacheBusyRatio, Direction: Rises, Precision: 2, Max: 1,
		Source:     "sensor.apache_status",
		Help:       "Apache's busy workers over its scoreboard slots (mod_status), 0 to 1.",
		Metric:     "gearshift_apache_busy_ratio",
		StatusLine: "apache busy",
	},
	{
		Name: BackendTTFBMs, Unit: "ms", Direction: Rises, Precision: 0,
		Source:     "sensor.probe.url",
		Help:       "The backend probe's time to first byte, smoothed.",
		Metric:     "gearshift_backend_ttfb_seconds",
		Scale:      0.001,
		PerfUOM:    "ms",
		StatusLine: "backend ttfb",
	},
	{
		Name: Injected, Direction: Rises, Precision: 2, Min: math.Inf(-1),
		Source:     "sensor.inject_file",
		Help:       "The number in sensor.inject_file.",
		Metric:     "gearshift_injected",
		StatusLine: "injected",
	},
}

func init() {
	for _, s := range sources {
		Register(s)
	}
}

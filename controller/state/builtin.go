package state

// LoadPerCPU is the machine's own signal: derived from the load average and
// the run queue, not read from a source.
var LoadPerCPU = Signal{
	Name: "load_per_cpu", Direction: Rises, Precision: 2,
	Help: "The decision signal max(load1, EWMA(runnable)) / CPUs.",
	Read: func(in Input) (float64, bool) {
		cpus := in.CPUs
		if cpus <= 0 {
			cpus = 1
		}
		return in.Load / float64(cpus), true
	},
	Metric:     "gearshift_load_per_cpu",
	StatusLine: "load/cpu",
	Bound:      LoadBound,
}

// Builtin are the signals every set starts with, whatever is configured.
var Builtin = []Signal{LoadPerCPU}

// ClientRPS names the signal the traffic guard reads (Config.DownTrafficRatio);
// the varnishstat source declares it.
const ClientRPS = "client_rps"

// builtinSet is the set of a Config without one.
var builtinSet = MustSet(Builtin)

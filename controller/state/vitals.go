package state

// vitals are the host's signals (SPEC section 3), the first rows of the
// table. Other signals register after them, from init functions in files
// of their own (see Register).
var vitals = []Signal{
	{
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
	},
	{
		Name: "mem_available_pct", Unit: "%", Direction: Falls, Precision: 1, Max: 100,
		Help:       "MemAvailable as a percentage of MemTotal.",
		Metric:     "gearshift_mem_available_ratio",
		Scale:      0.01,
		PerfLabel:  "mem_available",
		PerfUOM:    "%",
		StatusLine: "mem avail",
	},
	{
		Name: "psi_cpu", Unit: "%", Direction: Rises, Precision: 1, Max: 100,
		Help:       "CPU pressure, some avg10.",
		Metric:     "gearshift_psi_cpu_ratio",
		Scale:      0.01,
		PerfUOM:    "%",
		StatusLine: "pressure", StatusPart: "cpu", StatusAbsent: "no PSI on this kernel",
	},
	{
		Name: "psi_mem", Unit: "%", Direction: Rises, Precision: 1, Max: 100,
		Help:       "Memory pressure, some avg10.",
		Metric:     "gearshift_psi_memory_ratio",
		Scale:      0.01,
		PerfUOM:    "%",
		StatusLine: "pressure", StatusPart: "mem", StatusAbsent: "no PSI on this kernel",
	},
}

// Package sensor reads the server's vitals (load, run queue, memory,
// pressure stall information) and the optional sources beside them
// (Varnish's traffic, a cgroup, Apache's workers, a backend probe, an
// injected value, PHP-FPM's pools) into a Sample.
package sensor

import (
	"maps"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// Sample is one reading of the server's vitals and of the configured sources.
type Sample struct {
	Time         time.Time
	Load1        float64
	Load5        float64
	Load15       float64
	Runnable     float64 // procs_running + procs_blocked less gearshift's own tasks, the mean of the reads since the last sample
	CPUs         int     // logical CPUs, or the config's override
	MemTotal     uint64  // bytes
	MemAvailable uint64  // bytes
	SwapUsed     uint64  // bytes
	PSI          *PSI    // nil when the kernel has no PSI

	// Values holds the figure of each signal read, by name: the
	// machine's memory and pressure, then each configured source's (see
	// Sources). A signal missing is unknown: no PSI, a source failing
	// (see Problems) or without a figure yet.
	Values map[string]float64
	// FromCgroup is the cgroup directory the memory and pressure signals
	// come from; empty: the machine's.
	FromCgroup string

	Problems []Problem // optional sources that failed this sample, by source

	// Varnish is the traffic of the local targets, summed, over the
	// poll; nil without one, or when a target has no rates this poll.
	Varnish *VarnishRates

	// Sites holds the figures read for one site alone, by site name then
	// signal name: its phpfpm_pool's signals, the series of a Prometheus
	// query labelled with the site. They are not in Values: a site's own
	// signals move that site alone (docs/sites.md).
	Sites map[string]map[string]float64
}

// SetSite records the figure v of the signal name for site alone.
func (s *Sample) SetSite(site, name string, v float64) {
	if s.Sites == nil {
		s.Sites = map[string]map[string]float64{}
	}
	if s.Sites[site] == nil {
		s.Sites[site] = map[string]float64{}
	}
	s.Sites[site][name] = v
}

// PSI holds /proc/pressure "avg10" figures, in percent. A nil field is a
// line the kernel did not print (old kernels have no "full" line for cpu).
type PSI struct {
	CPUSome    float64
	CPUFull    *float64
	MemorySome float64
	MemoryFull *float64
	IOSome     float64
	IOFull     *float64
}

// Reading returns the state machine's input for the sample: the load, the
// run queue and the figure of each signal the sample has.
func (s Sample) Reading() state.Reading {
	return state.Reading{
		Time:     s.Time,
		Load1:    s.Load1,
		RunQueue: s.Runnable,
		CPUs:     s.CPUs,
		Values:   maps.Clone(s.Values),
	}
}

// Package sensor reads the server's vitals (load, run queue, memory,
// pressure stall information) and the optional sources beside them
// (Varnish's traffic, a cgroup, Apache's workers, a backend probe, an
// injected value) into a Sample.
package sensor

import (
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// Sample is one reading of the server's vitals.
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

	// FromCgroup is the cgroup directory PSI, MemTotal and MemAvailable
	// come from; empty: the machine's.
	FromCgroup string
	// The optional sources' figures; nil when the source is not configured,
	// failed (see Problems), or has no figure yet.
	Traffic         *VarnishRates // summed over the Varnish targets with a -n name
	ApacheBusyRatio *float64      // 0–1
	BackendTTFBMs   *float64      // the probe's time to first byte, ms
	Injected        *float64      // the number in the inject file

	Problems []Problem // optional sources that failed this sample, by source
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

// Reading returns the state machine's input for the sample: the load and
// run queue, and the raw figure of each signal the sample has
// (mem_available_pct without a memory total, the PSI signals without PSI,
// and the figures of sources not configured or failing are left out:
// unknown).
func (s Sample) Reading() state.Reading {
	r := state.Reading{
		Time:     s.Time,
		Load1:    s.Load1,
		RunQueue: s.Runnable,
		CPUs:     s.CPUs,
		Values:   map[string]float64{},
	}
	if s.MemTotal > 0 {
		r.Values["mem_available_pct"] = 100 * float64(s.MemAvailable) / float64(s.MemTotal)
	}
	if s.PSI != nil {
		r.Values["psi_cpu"], r.Values["psi_mem"] = s.PSI.CPUSome, s.PSI.MemorySome
	}
	if t := s.Traffic; t != nil {
		r.Values[state.ClientRPS] = t.ClientRPS
		r.Values[state.BackendRPS] = t.BackendRPS
		r.Values[state.BackendFailRPS] = t.BackendFailRPS
		r.Values[state.DroppedRPS] = t.DroppedRPS
		r.Values[state.QueueLen] = t.QueueLen
	}
	for name, v := range map[string]*float64{
		state.ApacheBusyRatio: s.ApacheBusyRatio,
		state.BackendTTFBMs:   s.BackendTTFBMs,
		state.Injected:        s.Injected,
	} {
		if v != nil {
			r.Values[name] = *v
		}
	}
	return r
}

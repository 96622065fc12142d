package sensor

import (
	"context"
	"errors"
	"runtime"
	"sort"
	"sync"
)

// Host is the daemon's sensor: the machine's vitals, and every optional
// source configured. A failing optional source does not fail the sample:
// its figures are missing from it and the failure is in Sample.Problems.
type Host struct {
	proc      *Proc
	cpuSource string
	readers   []hostReader
}

// hostReader is the reader of one configured source.
type hostReader struct {
	src *Source
	Reader
}

// NewHost returns the sensor of cfg. It fails on a source that cannot work
// at all: a malformed URL.
func NewHost(cfg HostConfig) (*Host, error) {
	h := &Host{}
	cpus, source := cfg.CPUs, "cpus in the config"
	if cpus <= 0 {
		cpus, source = runtime.NumCPU(), "logical CPUs"
		if q, ok := DetectCPUQuota(); ok && q.CPUs < cpus {
			cpus, source = q.CPUs, "cpu.max of "+q.Dir
		}
	}
	h.proc, h.cpuSource = NewProc(cpus), source
	for _, src := range Sources {
		if src.Open == nil || !src.On(cfg) {
			continue
		}
		r, err := src.Open(cfg)
		if err != nil {
			return nil, err
		}
		h.readers = append(h.readers, hostReader{src: src, Reader: r})
	}
	return h, nil
}

// CPUs returns the number of CPUs the samples report, and where it comes
// from ("cpu.max of /sys/fs/cgroup", "logical CPUs", "cpus in the config").
func (h *Host) CPUs() (int, string) { return h.proc.CPUs(), h.cpuSource }

// Sources names the optional sources configured, in the order of Sources.
func (h *Host) Sources() []string {
	var ns []string
	for _, r := range h.readers {
		ns = append(ns, r.src.Name)
	}
	return ns
}

// Sample reads the machine's vitals and, at the same time, every optional
// source. Only the machine's vitals failing is an error.
func (h *Host) Sample(ctx context.Context) (Sample, error) {
	applies := make([]func(*Sample), len(h.readers))
	errs := make([]error, len(h.readers))
	var wg sync.WaitGroup
	for i, r := range h.readers {
		wg.Go(func() { applies[i], errs[i] = r.Read(ctx) })
	}
	s, err := h.proc.Sample(ctx)
	wg.Wait()
	if err != nil {
		return Sample{}, err
	}
	for i, r := range h.readers {
		if err := errs[i]; err != nil {
			for _, name := range r.src.Overrides {
				delete(s.Values, name)
			}
			var ps Problems
			if errors.As(err, &ps) {
				s.Problems = append(s.Problems, ps...)
			} else {
				s.Problems = append(s.Problems, Problem{Source: r.src.Name, Err: err})
			}
		}
		if applies[i] != nil {
			applies[i](&s)
		}
	}
	sort.Slice(s.Problems, func(i, j int) bool { return s.Problems[i].Source < s.Problems[j].Source })
	return s, nil
}

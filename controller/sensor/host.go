package sensor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// HostConfig names the optional sources a Host reads beside the machine's
// vitals. The zero value reads the machine's vitals only.
type HostConfig struct {
	CPUs         int           // > 0 overrides the detected CPUs (cgroup quota, else logical CPUs)
	Varnish      []string      // varnishd -n names of local targets: client_rps and the like
	Cgroup       string        // a cgroup v2 path: psi_cpu, psi_mem, mem_available_pct come from it
	ApacheStatus string        // mod_status URL: apache_busy_ratio
	ProbeURL     string        // backend_ttfb_ms
	ProbeTimeout time.Duration // DefaultProbeTimeout when 0
	InjectFile   string        // injected
}

// Host is the daemon's sensor: the machine's vitals, and every optional
// source configured. A failing optional source does not fail the sample:
// its figures are missing from it and the failure is in Sample.Problems.
type Host struct {
	proc      *Proc
	cpuSource string
	varnish   []*varnishSource
	cgroup    *Cgroup
	apache    *ApacheStatus
	probe     *Probe
	ttfb      state.EWMA
	inject    *InjectFile
}

// probeWindow smooths the backend's time to first byte: one slow page is
// not a slow backend, ten seconds of them are.
const probeWindow = 10 * time.Second

type varnishSource struct {
	stat  Varnishstat
	rates CounterRates
}

// Source names, as Problem.Source gives them.
const (
	SourceCgroup = "cgroup"
	SourceApache = "apache_status"
	SourceProbe  = "probe"
	SourceInject = "inject_file"
)

// SourceVarnish is the Problem.Source of the varnishd named name.
func SourceVarnish(name string) string { return "varnishstat " + name }

// Problem is an optional source that failed during one sample.
type Problem struct {
	Source string // SourceCgroup, SourceVarnish(name), …
	Err    error
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
	for _, name := range cfg.Varnish {
		h.varnish = append(h.varnish, &varnishSource{stat: Varnishstat{Name: name}})
	}
	var err error
	if cfg.Cgroup != "" {
		h.cgroup = NewCgroup(cfg.Cgroup)
	}
	if cfg.ApacheStatus != "" {
		if h.apache, err = NewApacheStatus(cfg.ApacheStatus, 0); err != nil {
			return nil, err
		}
	}
	if cfg.ProbeURL != "" {
		if h.probe, err = NewProbe(cfg.ProbeURL, cfg.ProbeTimeout); err != nil {
			return nil, err
		}
		h.ttfb.Window = probeWindow
	}
	if cfg.InjectFile != "" {
		h.inject = &InjectFile{Path: cfg.InjectFile}
	}
	return h, nil
}

// CPUs returns the number of CPUs the samples report, and where it comes
// from ("cpu.max of /sys/fs/cgroup", "logical CPUs", "cpus in the config").
func (h *Host) CPUs() (int, string) { return h.proc.CPUs(), h.cpuSource }

// Sources names the optional sources configured, as Problem.Source does.
func (h *Host) Sources() []string {
	var ns []string
	for _, v := range h.varnish {
		ns = append(ns, SourceVarnish(v.stat.Name))
	}
	if h.cgroup != nil {
		ns = append(ns, SourceCgroup)
	}
	if h.apache != nil {
		ns = append(ns, SourceApache)
	}
	if h.probe != nil {
		ns = append(ns, SourceProbe)
	}
	if h.inject != nil {
		ns = append(ns, SourceInject)
	}
	return ns
}

// Sample reads the machine's vitals and, at the same time, every optional
// source. Only the machine's vitals failing is an error.
func (h *Host) Sample(ctx context.Context) (Sample, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		problems []Problem
		cg       *CgroupReading
		traffic  = make([]*VarnishRates, len(h.varnish))
		trafErr  = make([]error, len(h.varnish))
	)
	problem := func(source string, err error) {
		mu.Lock()
		problems = append(problems, Problem{Source: source, Err: err})
		mu.Unlock()
	}
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	for i, v := range h.varnish {
		run(func() {
			c, err := v.stat.Read(ctx)
			if err != nil {
				v.rates.Reset()
				trafErr[i] = err
				return
			}
			r, err := v.rates.Update(time.Now(), c)
			if err != nil {
				trafErr[i] = err
				return
			}
			traffic[i] = &r
		})
	}
	var busy, ttfb, injected *float64
	if h.cgroup != nil {
		run(func() {
			r, err := h.cgroup.Read()
			if err != nil {
				problem(SourceCgroup, err)
				return
			}
			cg = &r
		})
	}
	if h.apache != nil {
		run(func() {
			v, err := h.apache.BusyRatio(ctx)
			if err != nil {
				problem(SourceApache, err)
				return
			}
			busy = &v
		})
	}
	if h.probe != nil {
		run(func() {
			d, err := h.probe.TTFB(ctx)
			if err != nil {
				h.ttfb.Reset()
				problem(SourceProbe, err)
				return
			}
			ms := h.ttfb.Update(time.Now(), float64(d)/float64(time.Millisecond))
			ttfb = &ms
		})
	}
	if h.inject != nil {
		run(func() {
			v, err := h.inject.Read()
			if err != nil {
				problem(SourceInject, err)
				return
			}
			injected = v
		})
	}
	s, err := h.proc.Sample(ctx)
	wg.Wait()
	if err != nil {
		return Sample{}, err
	}
	s.Problems = problems

	if len(h.varnish) > 0 {
		s.Traffic = sumTraffic(traffic)
		for i, err := range trafErr {
			if err != nil && !errors.Is(err, ErrBaseline) {
				s.Problems = append(s.Problems, Problem{Source: SourceVarnish(h.varnish[i].stat.Name), Err: err})
			}
		}
	}
	if h.cgroup != nil {
		// The cgroup's figures replace the machine's; a cgroup that could
		// not be read leaves them unknown rather than the machine's.
		s.FromCgroup = h.cgroup.Dir
		s.PSI, s.MemTotal, s.MemAvailable = nil, 0, 0
		if cg != nil {
			s.PSI = cg.PSI
			s.MemAvailable, s.MemTotal = cg.MemAvailable(hostMem(s))
		}
	}
	s.ApacheBusyRatio, s.BackendTTFBMs, s.Injected = busy, ttfb, injected
	sort.Slice(s.Problems, func(i, j int) bool { return s.Problems[i].Source < s.Problems[j].Source })
	return s, nil
}

func hostMem(s Sample) (total, available uint64) { return s.MemTotal, s.MemAvailable }

// sumTraffic adds the targets' rates up; any target without rates (failing,
// or just primed) makes the sum unknown, since a partial sum would look
// like the traffic fell.
func sumTraffic(rates []*VarnishRates) *VarnishRates {
	var sum VarnishRates
	for _, r := range rates {
		if r == nil {
			return nil
		}
		sum.ClientRPS += r.ClientRPS
		sum.BackendRPS += r.BackendRPS
		sum.BackendFailRPS += r.BackendFailRPS
		sum.DroppedRPS += r.DroppedRPS
		sum.QueuedRPS += r.QueuedRPS
		sum.QueueLen += r.QueueLen
	}
	return &sum
}

// String describes the problem for a log line.
func (p Problem) String() string { return fmt.Sprintf("%s: %v", p.Source, p.Err) }

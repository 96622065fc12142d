package sensor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/shirou/gopsutil/v3/common"
	"github.com/shirou/gopsutil/v3/load"
	"github.com/shirou/gopsutil/v3/mem"

	"github.com/gearshift/gearshift/controller/state"
)

// vitals is the part of gopsutil the sensor reads; tests replace it. The
// run queue is read apart (see runQueue).
type vitals interface {
	Avg(ctx context.Context) (*load.AvgStat, error)
	VirtualMemory(ctx context.Context) (*mem.VirtualMemoryStat, error)
}

// gopsutil reads vitals from the proc filesystem at root.
type gopsutil struct{ root string }

func (g gopsutil) ctx(ctx context.Context) context.Context {
	if g.root == "/proc" {
		return ctx // gopsutil's default, which also honours HOST_PROC
	}
	return context.WithValue(ctx, common.EnvKey, common.EnvMap{common.HostProcEnvKey: g.root})
}

func (g gopsutil) Avg(ctx context.Context) (*load.AvgStat, error) {
	return load.AvgWithContext(g.ctx(ctx))
}

func (g gopsutil) VirtualMemory(ctx context.Context) (*mem.VirtualMemoryStat, error) {
	return mem.VirtualMemoryWithContext(g.ctx(ctx))
}

// Proc reads the host's real vitals: load average and memory through
// gopsutil, the run queue from /proc/stat (runQueue), pressure from
// /proc/pressure.
type Proc struct {
	cpus     int
	vitals   vitals
	runQueue func() (float64, error) // the mean run queue since the last sample
	pressure string                  // directory of the cpu, memory and io pressure files
	readFile func(string) ([]byte, error)
	now      func() time.Time
}

// NewProc returns a sensor of this host. cpus > 0 overrides the detected
// number of logical CPUs (containers, cgroup quotas).
func NewProc(cpus int) *Proc {
	p := newProc("/proc", cpus)
	p.runQueue = (&runQueue{root: "/proc"}).take
	return p
}

// newProc returns a sensor reading the proc filesystem at root, its run
// queue once per sample, when asked (no background reads).
func newProc(root string, cpus int) *Proc {
	if cpus <= 0 {
		// NumCPU honours the affinity mask, so a cpuset-limited container
		// counts only the CPUs it may run on.
		cpus = runtime.NumCPU()
	}
	return &Proc{
		cpus:     cpus,
		vitals:   gopsutil{root: root},
		runQueue: func() (float64, error) { return readRunQueueOnce(root) },
		pressure: filepath.Join(root, "pressure"),
		readFile: os.ReadFile,
		now:      time.Now,
	}
}

// CPUs returns the number of CPUs the samples report.
func (p *Proc) CPUs() int { return p.cpus }

// Sample reads the vitals. A kernel without PSI gives a sample with a nil
// PSI, not an error.
func (p *Proc) Sample(ctx context.Context) (Sample, error) {
	s := Sample{Time: p.now(), CPUs: p.cpus, Values: map[string]float64{}}
	rq, err := p.runQueue()
	if err != nil {
		return Sample{}, fmt.Errorf("read run queue: %w", err)
	}
	s.Runnable = rq

	avg, err := p.vitals.Avg(ctx)
	if err != nil {
		return Sample{}, fmt.Errorf("read load average: %w", err)
	}
	s.Load1, s.Load5, s.Load15 = avg.Load1, avg.Load5, avg.Load15

	vm, err := p.vitals.VirtualMemory(ctx)
	if err != nil {
		return Sample{}, fmt.Errorf("read memory: %w", err)
	}
	s.MemTotal, s.MemAvailable = vm.Total, vm.Available
	if vm.SwapTotal > vm.SwapFree {
		s.SwapUsed = vm.SwapTotal - vm.SwapFree
	}

	if s.PSI, err = readPSI(p.pressure, p.readFile); err != nil {
		return Sample{}, err
	}
	if s.MemTotal > 0 {
		s.Values[MemAvailablePct] = 100 * float64(s.MemAvailable) / float64(s.MemTotal)
	}
	if s.PSI != nil {
		s.Values[PSICPU], s.Values[PSIMem] = s.PSI.CPUSome, s.PSI.MemorySome
	}
	return s, nil
}

// The signals of the machine's vitals.
const (
	MemAvailablePct = "mem_available_pct"
	PSICPU          = "psi_cpu"
	PSIMem          = "psi_mem"
)

// vitalsSource is the machine itself: always on, read by the Host (a
// failure fails the sample), its figures possibly replaced by a cgroup's.
var vitalsSource = Source{
	Name: "vitals",
	Signals: []state.Signal{
		{
			Name: MemAvailablePct, Unit: "%", Direction: state.Falls, Precision: 1, Max: 100,
			Help:       "MemAvailable as a percentage of MemTotal.",
			Metric:     "gearshift_mem_available_ratio",
			Scale:      0.01,
			PerfLabel:  "mem_available",
			PerfUOM:    "%",
			StatusLine: "mem avail",
		},
		{
			Name: PSICPU, Unit: "%", Direction: state.Rises, Precision: 1, Max: 100,
			Help:       "CPU pressure, some avg10.",
			Metric:     "gearshift_psi_cpu_ratio",
			Scale:      0.01,
			PerfUOM:    "%",
			StatusLine: "pressure", StatusPart: "cpu", StatusAbsent: "no PSI on this kernel",
		},
		{
			Name: PSIMem, Unit: "%", Direction: state.Rises, Precision: 1, Max: 100,
			Help:       "Memory pressure, some avg10.",
			Metric:     "gearshift_psi_memory_ratio",
			Scale:      0.01,
			PerfUOM:    "%",
			StatusLine: "pressure", StatusPart: "mem", StatusAbsent: "no PSI on this kernel",
		},
	},
	On: func(HostConfig) bool { return true },
}

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
)

// vitals is the part of gopsutil the sensor reads; tests replace it.
type vitals interface {
	Avg(ctx context.Context) (*load.AvgStat, error)
	Misc(ctx context.Context) (*load.MiscStat, error)
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

func (g gopsutil) Misc(ctx context.Context) (*load.MiscStat, error) {
	return load.MiscWithContext(g.ctx(ctx))
}

func (g gopsutil) VirtualMemory(ctx context.Context) (*mem.VirtualMemoryStat, error) {
	return mem.VirtualMemoryWithContext(g.ctx(ctx))
}

// Proc reads the host's real vitals: load average, run queue and memory
// through gopsutil, pressure from /proc/pressure.
type Proc struct {
	cpus     int
	vitals   vitals
	pressure string // directory of the cpu, memory and io pressure files
	readFile func(string) ([]byte, error)
	now      func() time.Time
}

// NewProc returns a sensor of this host. cpus > 0 overrides the detected
// number of logical CPUs (containers, cgroup quotas).
func NewProc(cpus int) *Proc {
	return newProc("/proc", cpus)
}

// newProc returns a sensor reading the proc filesystem at root.
func newProc(root string, cpus int) *Proc {
	if cpus <= 0 {
		// NumCPU honours the affinity mask, so a cpuset-limited container
		// counts only the CPUs it may run on.
		cpus = runtime.NumCPU()
	}
	return &Proc{
		cpus:     cpus,
		vitals:   gopsutil{root: root},
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
	s := Sample{Time: p.now(), CPUs: p.cpus}
	avg, err := p.vitals.Avg(ctx)
	if err != nil {
		return Sample{}, fmt.Errorf("read load average: %w", err)
	}
	s.Load1, s.Load5, s.Load15 = avg.Load1, avg.Load5, avg.Load15

	misc, err := p.vitals.Misc(ctx)
	if err != nil {
		return Sample{}, fmt.Errorf("read run queue: %w", err)
	}
	s.Runnable = runnable(misc)

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
	return s, nil
}

// runnable is the run queue without the poller: procs_running counts the
// task reading /proc/stat, which is this process.
func runnable(m *load.MiscStat) int {
	n := m.ProcsRunning + m.ProcsBlocked - 1
	if n < 0 {
		return 0
	}
	return n
}

package sensor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultCgroupRoot is where cgroup v2 is mounted on most systems; hybrid
// systems mount it at /sys/fs/cgroup/unified, which the mount table tells.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// Cgroup reads the pressure, memory and CPU quota of one cgroup v2
// directory: a service's (system.slice/apache2.service) or a container's own.
type Cgroup struct {
	Name     string // as configured
	Dir      string
	readFile func(string) ([]byte, error)
}

// CgroupReading is one reading of a cgroup. A controller that is not
// enabled for the cgroup shows as no limit and, for memory, no usage.
type CgroupReading struct {
	PSI       *PSI    // from cpu.pressure, memory.pressure, io.pressure; nil without PSI
	HasMemory bool    // the memory controller is on: MemUsed is known
	MemUsed   uint64  // memory.current less the inactive file cache (reclaimable), bytes
	MemLimit  uint64  // memory.max, bytes; 0: "max", no limit
	CPUQuota  float64 // cpu.max quota over period, in CPUs; 0: "max", no limit
}

// NewCgroup returns the cgroup at p: an absolute directory, or a path
// under the cgroup v2 mount (/sys/fs/cgroup, or where the mount table puts
// it). The directory need not exist yet: a service's cgroup comes and goes
// with the service, and Read says so.
func NewCgroup(p string) *Cgroup {
	dir := p
	if !filepath.IsAbs(p) {
		root := DefaultCgroupRoot
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
			if m, ok := cgroup2Mount(string(b)); ok {
				root = m.dir
			}
		}
		dir = filepath.Join(root, p)
	}
	return &Cgroup{Name: p, Dir: dir, readFile: os.ReadFile}
}

// Reading reads the cgroup's files. Only a file that exists and cannot be read
// or parsed is an error; missing ones mean the controller is off.
func (c *Cgroup) Reading() (CgroupReading, error) {
	var r CgroupReading
	_, err := c.readFile(c.file("cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return CgroupReading{}, fmt.Errorf("cgroup %s: %s is not a cgroup v2 directory (no cgroup.procs)", c.Name, c.Dir)
	}
	if err != nil {
		return CgroupReading{}, fmt.Errorf("read cgroup %s: %w", c.Name, err)
	}
	if r.PSI, err = readPressure(c.readFile, c.file("cpu.pressure"), c.file("memory.pressure"), c.file("io.pressure")); err != nil {
		return CgroupReading{}, err
	}
	if s, ok, err := c.optional("memory.current"); err != nil {
		return CgroupReading{}, err
	} else if ok {
		cur, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return CgroupReading{}, fmt.Errorf("parse %s: want a number of bytes, got %q", c.file("memory.current"), strings.TrimSpace(s))
		}
		r.HasMemory, r.MemUsed = true, cur
		if stat, ok, err := c.optional("memory.stat"); err != nil {
			return CgroupReading{}, err
		} else if ok {
			// The working set, as the kernel's OOM decisions and kubelet
			// see it: inactive page cache is reclaimed before anyone dies.
			if inactive, ok := memoryStat(stat, "inactive_file"); ok && inactive < cur {
				r.MemUsed = cur - inactive
			}
		}
	}
	if s, ok, err := c.optional("memory.max"); err != nil {
		return CgroupReading{}, err
	} else if ok {
		if r.MemLimit, err = parseCgroupBytes(s); err != nil {
			return CgroupReading{}, fmt.Errorf("parse %s: %w", c.file("memory.max"), err)
		}
	}
	if s, ok, err := c.optional("cpu.max"); err != nil {
		return CgroupReading{}, err
	} else if ok {
		if r.CPUQuota, err = parseCPUMax(s); err != nil {
			return CgroupReading{}, fmt.Errorf("parse %s: %w", c.file("cpu.max"), err)
		}
	}
	return r, nil
}

func (c *Cgroup) file(name string) string { return filepath.Join(c.Dir, name) }

// optional reads a cgroup file; a missing one is no error, just not there.
func (c *Cgroup) optional(name string) (string, bool, error) {
	b, err := c.readFile(c.file(name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read cgroup: %w", err)
	}
	return string(b), true, nil
}

// MemAvailable returns the memory available to the cgroup and the total it
// may use. With no memory limit (or no memory controller) the cgroup may use
// the host's memory, so the host's figures are its figures. With a limit,
// what is left under the limit, but never more than the host has free.
func (r CgroupReading) MemAvailable(hostTotal, hostAvailable uint64) (available, total uint64) {
	if !r.HasMemory || r.MemLimit == 0 {
		return hostAvailable, hostTotal
	}
	var free uint64
	if r.MemUsed < r.MemLimit {
		free = r.MemLimit - r.MemUsed
	}
	return min(free, hostAvailable), r.MemLimit
}

// parseCgroupBytes parses memory.max or memory.current: a number of bytes,
// or "max" for no limit (returned as 0).
func parseCgroupBytes(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf(`want a number of bytes or "max", got %q`, s)
	}
	return n, nil
}

// parseCPUMax parses cpu.max, "$QUOTA $PERIOD" in microseconds ("max 100000"
// for no limit), into a number of CPUs; 0 for no limit.
func parseCPUMax(s string) (float64, error) {
	fields := strings.Fields(s)
	if len(fields) != 2 {
		return 0, fmt.Errorf(`want "quota period", got %q`, strings.TrimSpace(s))
	}
	period, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil || period == 0 {
		return 0, fmt.Errorf("period %q is not a positive number of microseconds", fields[1])
	}
	if fields[0] == "max" {
		return 0, nil
	}
	quota, err := strconv.ParseUint(fields[0], 10, 64)
	if err != nil || quota == 0 {
		return 0, fmt.Errorf(`quota %q is neither "max" nor a positive number of microseconds`, fields[0])
	}
	return float64(quota) / float64(period), nil
}

// memoryStat returns the value of key in memory.stat ("anon 123\nfile 456").
func memoryStat(text, key string) (uint64, bool) {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// cgroupMount is where the cgroup v2 hierarchy is mounted: dir shows the
// hierarchy from root on (a container's mount may start below the top).
type cgroupMount struct {
	dir  string
	root string
}

// cgroup2Mount finds the cgroup2 mount in /proc/self/mountinfo:
//
//	41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
func cgroup2Mount(mountinfo string) (cgroupMount, bool) {
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fields, fstype := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(fstype) == 0 || fstype[0] != "cgroup2" {
			continue
		}
		return cgroupMount{dir: unescape.Replace(fields[4]), root: unescape.Replace(fields[3])}, true
	}
	return cgroupMount{}, false
}

// ownCgroup returns this process's cgroup v2 path from /proc/self/cgroup,
// the line "0::/system.slice/gearshift.service".
func ownCgroup(procSelfCgroup string) (string, bool) {
	for _, line := range strings.Split(procSelfCgroup, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return p, true
		}
	}
	return "", false
}

// CPUQuota is the CPU limit this process runs under: the tightest cpu.max
// of its own cgroup and the cgroups above it, as a whole number of CPUs
// (1.5 CPUs of quota count as 2) and the directory that sets it.
type CPUQuota struct {
	CPUs int
	Dir  string
}

// DetectCPUQuota reports the CPU quota of this process's own cgroup (a
// container's, a systemd unit's with CPUQuota=), and false when none limits
// it or cgroup v2 is not there.
func DetectCPUQuota() (CPUQuota, bool) {
	return detectCPUQuota("/proc/self", os.ReadFile)
}

func detectCPUQuota(proc string, readFile func(string) ([]byte, error)) (CPUQuota, bool) {
	cg, err := readFile(filepath.Join(proc, "cgroup"))
	if err != nil {
		return CPUQuota{}, false
	}
	own, ok := ownCgroup(string(cg))
	if !ok {
		return CPUQuota{}, false
	}
	mi, err := readFile(filepath.Join(proc, "mountinfo"))
	if err != nil {
		return CPUQuota{}, false
	}
	m, ok := cgroup2Mount(string(mi))
	if !ok {
		return CPUQuota{}, false
	}
	// Inside a cgroup namespace the mount's root is "/" and so is the own
	// path; without one the own path starts with the mount's root.
	rel, ok := strings.CutPrefix(own, m.root)
	if !ok {
		return CPUQuota{}, false
	}
	best := CPUQuota{}
	tightest := math.Inf(1)
	for p := path.Clean("/" + rel); ; p = path.Dir(p) {
		dir := filepath.Join(m.dir, p)
		if b, err := readFile(filepath.Join(dir, "cpu.max")); err == nil {
			if q, err := parseCPUMax(string(b)); err == nil && q > 0 && q < tightest {
				tightest, best.Dir = q, dir
			}
		}
		if p == "/" {
			break
		}
	}
	if best.Dir == "" {
		return CPUQuota{}, false
	}
	best.CPUs = max(1, int(math.Ceil(tightest)))
	return best, true
}

var cgroupSource = Source{
	Name:      "cgroup",
	Key:       "sensor.cgroup",
	Overrides: []string{MemAvailablePct, PSICPU, PSIMem},
	On:        on(func(cfg HostConfig) string { return cfg.Sensor.Cgroup }),
	Check: func(cfg HostConfig, problem func(key, format string, args ...any)) {
		if p := cfg.Sensor.Cgroup; p != "" {
			clean := filepath.Clean(p)
			if !filepath.IsAbs(clean) && (clean == ".." || strings.HasPrefix(clean, "../")) {
				problem("sensor.cgroup", "must be a path under /sys/fs/cgroup or an absolute path, got %q", p)
			}
		}
	},
	Open: func(cfg HostConfig) (Reader, error) { return NewCgroup(cfg.Sensor.Cgroup), nil },
}

// Read implements Reader: the cgroup's pressure and memory replace the
// machine's (its memory figures need the machine's when it has no limit).
func (c *Cgroup) Read(context.Context) (func(*Sample), error) {
	r, err := c.Reading()
	if err != nil {
		return nil, err
	}
	return func(s *Sample) {
		s.FromCgroup = c.Dir
		delete(s.Values, PSICPU)
		delete(s.Values, PSIMem)
		if r.PSI != nil {
			s.Values[PSICPU], s.Values[PSIMem] = r.PSI.CPUSome, r.PSI.MemorySome
		}
		delete(s.Values, MemAvailablePct)
		if available, total := r.MemAvailable(s.MemTotal, s.MemAvailable); total > 0 {
			s.Values[MemAvailablePct] = 100 * float64(available) / float64(total)
		}
	}, nil
}

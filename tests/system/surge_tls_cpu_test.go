package system

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuUse is CPU time over a stretch: by process group, this process's
// (the load generator), and the machine's busy time out of total (wall
// time × CPUs).
type cpuUse struct {
	hitch, varnish, apache, db, daemon, load time.Duration
	busy, total                              time.Duration
}

// rest is the machine's busy time no counted process took: the kernel's
// (softirqs of loopback traffic), other processes', others' work.
func (c cpuUse) rest() time.Duration {
	return max(0, c.busy-c.hitch-c.varnish-c.apache-c.db-c.daemon-c.load)
}

func (c cpuUse) String() string {
	return fmt.Sprintf("busy %s of %s: hitch %s, varnishd %s, Apache+PHP %s, MariaDB %s, gearshift %s, load generator %s",
		cpuS(c.busy), cpuS(c.total), cpuS(c.hitch), cpuS(c.varnish), cpuS(c.apache), cpuS(c.db), cpuS(c.daemon), cpuS(c.load))
}

// clockTick is the kernel's USER_HZ, the unit of /proc's CPU times (100
// on Linux, whatever the kernel's HZ).
const clockTick = 10 * time.Millisecond

// cpuSnap is cpuUse's counters at one moment.
type cpuSnap struct {
	at   time.Time
	use  cpuUse
	idle time.Duration // the machine's idle and iowait
}

// snapshot reads every process's CPU times and the machine's.
func (g procGroups) snapshot() cpuSnap {
	s := cpuSnap{at: time.Now()}
	varnish := g.varnish()
	self := os.Getpid()
	eachProcess(func(pid, pgrp, ppid int, own, reaped time.Duration) {
		switch {
		case pid == self:
			s.use.load += own // its children (the daemons) are counted apart
		case pid == g.daemon || (ppid == g.daemon && g.daemon > 0): // with its varnishlog
			s.use.daemon += own + reaped
		case pgrp == g.hitch && g.hitch > 0:
			s.use.hitch += own + reaped
		case pgrp == varnish && varnish > 0:
			s.use.varnish += own + reaped
		case (pgrp == g.apache && g.apache > 0) || (pgrp == g.fpm && g.fpm > 0):
			s.use.apache += own + reaped
		case pgrp == g.db && g.db > 0:
			s.use.db += own + reaped
		}
	})
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		// cpu user nice system idle iowait irq softirq steal …
		for i, f := range strings.Fields(line)[1:] {
			if i >= 8 {
				break
			}
			n, _ := strconv.ParseInt(f, 10, 64)
			if i == 3 || i == 4 {
				s.idle += time.Duration(n) * clockTick
			} else {
				s.use.busy += time.Duration(n) * clockTick
			}
		}
	}
	return s
}

// since is the CPU used from before to s.
func (s cpuSnap) since(before cpuSnap) cpuUse {
	a, b := s.use, before.use
	busy := a.busy - b.busy
	return cpuUse{
		hitch: a.hitch - b.hitch, varnish: a.varnish - b.varnish, apache: a.apache - b.apache,
		db: a.db - b.db, daemon: a.daemon - b.daemon, load: a.load - b.load,
		busy: busy, total: busy + s.idle - before.idle,
	}
}

// eachProcess calls fn with each running process's pid, process group,
// parent, own CPU time and its reaped children's, as parseStat reads them.
func eachProcess(fn func(pid, pgrp, ppid int, own, reaped time.Duration)) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if pgrp, ppid, own, reaped, ok := parseStat(b); ok {
			fn(pid, pgrp, ppid, own, reaped)
		}
	}
}

// parseStat reads a /proc/PID/stat: the process group, the parent, the
// process's own CPU time (utime + stime) and its reaped children's
// (cutime + cstime).
func parseStat(b []byte) (pgrp, ppid int, own, reaped time.Duration, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, 0, false
	}
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime …, comm (which may hold spaces)
	// skipped.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, 0, 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	n := func(j int) time.Duration { v, _ := strconv.ParseInt(f[j], 10, 64); return time.Duration(v) * clockTick }
	return pgrp, ppid, n(11) + n(12), n(13) + n(14), true
}

// pgrpOf is pid's process group, 0 when it is not running.
func pgrpOf(pid int) int {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	pgrp, _, _, _, _ := parseStat(b)
	return pgrp
}

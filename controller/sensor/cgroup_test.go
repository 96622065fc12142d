package sensor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		text    string
		want    float64
		wantErr bool
	}{
		{text: "max 100000\n", want: 0},
		{text: "150000 100000\n", want: 1.5},
		{text: "200000 100000", want: 2},
		{text: "50000 100000\n", want: 0.5},
		{text: "max\n", wantErr: true},
		{text: "", wantErr: true},
		{text: "0 100000\n", wantErr: true},
		{text: "-1 100000\n", wantErr: true},
		{text: "100000 0\n", wantErr: true},
		{text: "lots 100000\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(strconv.Quote(tc.text), func(t *testing.T) {
			got, err := parseCPUMax(tc.text)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseCPUMax = %v, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseCPUMax = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseCgroupBytes(t *testing.T) {
	tests := []struct {
		text    string
		want    uint64
		wantErr bool
	}{
		{text: "max\n", want: 0},
		{text: "536870912\n", want: 536870912},
		{text: "0\n", want: 0},
		{text: "512M\n", wantErr: true},
		{text: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(strconv.Quote(tc.text), func(t *testing.T) {
			got, err := parseCgroupBytes(tc.text)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseCgroupBytes = %v, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseCgroupBytes = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCgroupRead(t *testing.T) {
	tests := []struct {
		dir     string
		want    CgroupReading
		wantErr string
	}{
		{
			dir: "limited",
			want: CgroupReading{
				PSI:       &PSI{CPUSome: 23.5, CPUFull: f(9.75), MemorySome: 5.25, MemoryFull: f(1.5), IOSome: 0.4, IOFull: f(0.2)},
				HasMemory: true,
				MemUsed:   436207616 - 100663296, // current less inactive_file
				MemLimit:  536870912,
				CPUQuota:  1.5,
			},
		},
		{
			dir: "unlimited",
			want: CgroupReading{
				PSI:       &PSI{CPUSome: 23.5, CPUFull: f(9.75), MemorySome: 5.25, MemoryFull: f(1.5), IOSome: 0.4, IOFull: f(0.2)},
				HasMemory: true,
				MemUsed:   209715200 - 52428800,
			},
		},
		{
			// What a cgroup gets where no controller is enabled for its
			// parent's children: pressure only.
			dir:  "no-controllers",
			want: CgroupReading{PSI: &PSI{CPUFull: f(0), MemoryFull: f(0), IOFull: f(0)}},
		},
		{dir: "garbled", wantErr: `testdata/cgroup/garbled/memory.max: want a number of bytes or "max", got "lots"`},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			c := &Cgroup{Dir: filepath.Join("testdata/cgroup", tc.dir), readFile: os.ReadFile}
			got, err := c.Reading()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !samePSI(got.PSI, tc.want.PSI) {
				t.Errorf("PSI = %s, want %s", psiString(got.PSI), psiString(tc.want.PSI))
			}
			got.PSI, tc.want.PSI = nil, nil
			if got != tc.want {
				t.Errorf("Read = %+v, want %+v", got, tc.want)
			}
		})
	}

	t.Run("unreadable", func(t *testing.T) {
		eacces := func(p string) ([]byte, error) {
			if strings.HasSuffix(p, "memory.max") {
				return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission}
			}
			return os.ReadFile(p)
		}
		c := &Cgroup{Dir: "testdata/cgroup/limited", readFile: eacces}
		if _, err := c.Reading(); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Read: error %v, want a permission error", err)
		}
	})
}

func TestCgroupMemAvailable(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name       string
		r          CgroupReading
		hostTotal  uint64
		hostAvail  uint64
		wantAvail  uint64
		wantTotal  uint64
		wantPctMax float64
	}{
		{name: "no memory controller: the host's", r: CgroupReading{}, hostTotal: 8 * gib, hostAvail: 6 * gib, wantAvail: 6 * gib, wantTotal: 8 * gib},
		{name: "no limit: the host's", r: CgroupReading{HasMemory: true, MemUsed: gib}, hostTotal: 8 * gib, hostAvail: 6 * gib, wantAvail: 6 * gib, wantTotal: 8 * gib},
		{name: "under its limit", r: CgroupReading{HasMemory: true, MemUsed: gib, MemLimit: 4 * gib}, hostTotal: 8 * gib, hostAvail: 6 * gib, wantAvail: 3 * gib, wantTotal: 4 * gib},
		{name: "at its limit", r: CgroupReading{HasMemory: true, MemUsed: 5 * gib, MemLimit: 4 * gib}, hostTotal: 8 * gib, hostAvail: 6 * gib, wantAvail: 0, wantTotal: 4 * gib},
		{name: "the host has less left than the limit", r: CgroupReading{HasMemory: true, MemUsed: gib, MemLimit: 4 * gib}, hostTotal: 8 * gib, hostAvail: gib / 2, wantAvail: gib / 2, wantTotal: 4 * gib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			avail, total := tc.r.MemAvailable(tc.hostTotal, tc.hostAvail)
			if avail != tc.wantAvail || total != tc.wantTotal {
				t.Errorf("MemAvailable = %d, %d; want %d, %d", avail, total, tc.wantAvail, tc.wantTotal)
			}
		})
	}
}

func TestCgroup2Mount(t *testing.T) {
	tests := []struct {
		name string
		text string
		want cgroupMount
		ok   bool
	}{
		{
			name: "unified (systemd's default)",
			text: "24 30 0:22 / /sys/kernel/security rw,nosuid - securityfs securityfs rw\n" +
				"26 30 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			want: cgroupMount{dir: "/sys/fs/cgroup", root: "/"}, ok: true,
		},
		{
			name: "hybrid: v1 controllers and v2 at unified",
			text: "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
				"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			want: cgroupMount{dir: "/sys/fs/cgroup/unified", root: "/"}, ok: true,
		},
		{
			name: "a container without a cgroup namespace sees its part of the host's",
			text: "612 600 0:26 /docker/4f1c /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n",
			want: cgroupMount{dir: "/sys/fs/cgroup", root: "/docker/4f1c"}, ok: true,
		},
		{
			name: "escaped space",
			text: "41 31 0:38 / /mnt/my\\040cgroups rw,relatime - cgroup2 cgroup2 rw\n",
			want: cgroupMount{dir: "/mnt/my cgroups", root: "/"}, ok: true,
		},
		{
			name: "v1 only",
			text: "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n",
		},
		{name: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := cgroup2Mount(tc.text)
			if got != tc.want || ok != tc.ok {
				t.Errorf("cgroup2Mount = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestOwnCgroup(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string
		ok   bool
	}{
		{name: "unified", text: "0::/system.slice/gearshift.service\n", want: "/system.slice/gearshift.service", ok: true},
		{name: "hybrid", text: "4:memory:/process_api/bdea1c67\n1:cpu:/\n0::/\n", want: "/", ok: true},
		{name: "v1 only", text: "4:memory:/user.slice\n1:cpu:/\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ownCgroup(tc.text)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ownCgroup = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// cgroupTree writes a fake /proc/self and cgroup v2 hierarchy under a temp
// dir: files maps paths under the hierarchy to contents.
func cgroupTree(tb testing.TB, own, mountRoot string, files map[string]string) (proc string) {
	tb.Helper()
	dir := tb.TempDir()
	mnt := filepath.Join(dir, "cgroup")
	proc = filepath.Join(dir, "proc")
	for p, text := range files {
		full := filepath.Join(mnt, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.MkdirAll(proc, 0o755); err != nil {
		tb.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	write("cgroup", "0::"+own+"\n")
	write("mountinfo", "26 30 0:24 "+mountRoot+" "+mnt+" rw,nosuid - cgroup2 cgroup2 rw\n")
	return proc
}

func TestDetectCPUQuota(t *testing.T) {
	tests := []struct {
		name      string
		own       string
		mountRoot string
		files     map[string]string
		want      CPUQuota // Dir relative to the hierarchy
		ok        bool
	}{
		{
			name: "a container's own cgroup (cgroup namespace)", own: "/", mountRoot: "/",
			files: map[string]string{"cpu.max": "150000 100000\n"},
			want:  CPUQuota{CPUs: 2, Dir: "."}, ok: true,
		},
		{
			name: "a systemd unit with CPUQuota=", own: "/system.slice/gearshift.service", mountRoot: "/",
			files: map[string]string{"system.slice/gearshift.service/cpu.max": "300000 100000\n", "system.slice/cpu.max": "max 100000\n"},
			want:  CPUQuota{CPUs: 3, Dir: "system.slice/gearshift.service"}, ok: true,
		},
		{
			name: "a parent's quota is tighter", own: "/kubepods/pod1/c1", mountRoot: "/",
			files: map[string]string{"kubepods/pod1/c1/cpu.max": "400000 100000\n", "kubepods/pod1/cpu.max": "100000 100000\n"},
			want:  CPUQuota{CPUs: 1, Dir: "kubepods/pod1"}, ok: true,
		},
		{
			name: "less than one CPU counts as one", own: "/", mountRoot: "/",
			files: map[string]string{"cpu.max": "20000 100000\n"},
			want:  CPUQuota{CPUs: 1, Dir: "."}, ok: true,
		},
		{
			name: "no cgroup namespace: the mount starts at the container's cgroup", own: "/docker/4f1c", mountRoot: "/docker/4f1c",
			files: map[string]string{"cpu.max": "200000 100000\n"},
			want:  CPUQuota{CPUs: 2, Dir: "."}, ok: true,
		},
		{
			name: "no limit", own: "/user.slice", mountRoot: "/",
			files: map[string]string{"user.slice/cpu.max": "max 100000\n"},
		},
		{
			name: "no cpu controller", own: "/user.slice", mountRoot: "/",
			files: map[string]string{"user.slice/cgroup.procs": ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := cgroupTree(t, tc.own, tc.mountRoot, tc.files)
			got, ok := detectCPUQuota(proc, os.ReadFile)
			if ok {
				rel, err := filepath.Rel(filepath.Join(filepath.Dir(proc), "cgroup"), got.Dir)
				if err != nil {
					t.Fatal(err)
				}
				got.Dir = rel
			}
			if got != tc.want || ok != tc.ok {
				t.Errorf("detectCPUQuota = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNewCgroup(t *testing.T) {
	abs, err := filepath.Abs("testdata/cgroup/limited")
	if err != nil {
		t.Fatal(err)
	}
	if c := NewCgroup(abs); c.Dir != abs {
		t.Errorf("NewCgroup(%s).Dir = %s, want that directory", abs, c.Dir)
	}
	notCgroup := t.TempDir()
	_, err = NewCgroup(notCgroup).Reading()
	if want := "is not a cgroup v2 directory (no cgroup.procs)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Read of a plain directory: error %v, want one containing %q", err, want)
	}
	_, err = NewCgroup("system.slice/no-such-gearshift-test.service").Reading()
	if want := "cgroup system.slice/no-such-gearshift-test.service: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Read of a missing cgroup: error %v, want one starting %q", err, want)
	}
}

// TestCgroupAgainstKernel reads a cgroup made for the test in the real
// cgroup v2 hierarchy, with a process in it and, where the parent enables
// the controllers, a memory and CPU limit. Where the kernel does not let
// the test make one (no cgroup v2, not root, read-only), it reads the
// fixture tree instead and says so.
func TestCgroupAgainstKernel(t *testing.T) {
	dir, name, why := makeTestCgroup(t)
	if dir == "" {
		t.Logf("using the fixture tree testdata/cgroup/limited: %s", why)
		abs, _ := filepath.Abs("testdata/cgroup/limited")
		r, err := NewCgroup(abs).Reading()
		if err != nil || r.PSI == nil || r.CPUQuota != 1.5 || r.MemLimit != 536870912 {
			t.Fatalf("Read = %+v, %v; want the fixture's PSI and limits", r, err)
		}
		return
	}
	t.Logf("using a real cgroup: %s", dir)

	limits := map[string]string{"memory.max": "67108864", "cpu.max": "50000 100000"}
	set := map[string]bool{}
	for file, value := range limits {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err == nil {
			set[file] = true
		} else {
			t.Logf("no %s here (%v): its controller is not enabled for the parent's children", file, err)
		}
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatalf("move a process into %s: %v", dir, err)
	}

	// A path relative to the hierarchy finds the same directory through
	// the mount table.
	c := NewCgroup(name)
	if c.Dir != dir {
		t.Errorf("NewCgroup(%s).Dir = %s, want %s", name, c.Dir, dir)
	}
	r, err := c.Reading()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	_, psiErr := os.Stat("/proc/pressure/cpu")
	if (r.PSI != nil) != (psiErr == nil) {
		t.Errorf("PSI = %s, while /proc/pressure/cpu: %v", psiString(r.PSI), psiErr)
	}
	if set["memory.max"] && (r.MemLimit != 67108864 || !r.HasMemory || r.MemUsed == 0) {
		t.Errorf("memory: %+v, want a 64 MiB limit and the sleeper's usage", r)
	}
	if !set["memory.max"] && r.MemLimit != 0 {
		t.Errorf("memory limit %d without a memory controller, want none", r.MemLimit)
	}
	if set["cpu.max"] && r.CPUQuota != 0.5 {
		t.Errorf("CPU quota %v, want 0.5", r.CPUQuota)
	}
	if !set["cpu.max"] && r.CPUQuota != 0 {
		t.Errorf("CPU quota %v without a cpu controller, want none", r.CPUQuota)
	}
}

// makeTestCgroup makes a child of the cgroup v2 root and removes it in
// Cleanup. It returns its directory and its path under the root, or why it
// could not.
func makeTestCgroup(tb testing.TB) (dir, name, why string) {
	tb.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", err.Error()
	}
	m, ok := cgroup2Mount(string(mi))
	if !ok {
		return "", "", "no cgroup2 mount"
	}
	raw := make([]byte, 4)
	rand.Read(raw)
	name = "gearshift-test-" + hex.EncodeToString(raw)
	dir = filepath.Join(m.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "", "cannot make a cgroup: " + err.Error()
	}
	tb.Cleanup(func() {
		// The cgroup goes once its last process has exited.
		for i := 0; i < 100; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		tb.Errorf("remove cgroup %s: still busy", dir)
	})
	return dir, name, ""
}

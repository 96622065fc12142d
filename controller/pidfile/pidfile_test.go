package pidfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestWriteRunningRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "gearshift.pid")
	if pid, err := Running(path); pid != 0 || err != nil {
		t.Fatalf("no file: Running = %d, %v; want 0, nil", pid, err)
	}
	f, err := Write(path)
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := Running(path); pid != os.Getpid() || err != nil {
		t.Errorf("Running = %d, %v; want %d", pid, err, os.Getpid())
	}
	if _, err := Write(path); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second Write while held: %v; want already running", err)
	}
	f.Remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("pid file still there after Remove: %v", err)
	}
	if pid, err := Running(path); pid != 0 || err != nil {
		t.Errorf("after Remove: Running = %d, %v; want 0, nil", pid, err)
	}
	var none *File
	none.Remove() // no pid file configured
}

// A pid file no process holds locked is stale whatever it says: garbage,
// a dead pid, or the pid of a live process that calls itself gearshift.
func TestRunningIgnoresUnlockedFiles(t *testing.T) {
	dir := t.TempDir()
	impostor := exec.Command("bash", "-c", "exec -a gearshift sleep 60")
	if err := impostor.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { impostor.Process.Kill(); impostor.Wait() }()
	for _, tc := range []struct{ name, text string }{
		{"empty", ""},
		{"garbage", "gearshift\n"},
		{"binary garbage", "\x00\xff\x01"},
		{"negative", "-1\n"},
		{"a dead pid", "999999999\n"},
		{"a live gearshift that is not the daemon", strconv.Itoa(impostor.Process.Pid) + "\n"},
		{"this very process, not holding it", strconv.Itoa(os.Getpid()) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "p.pid")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			if pid, err := Running(path); pid != 0 || err != nil {
				t.Errorf("Running = %d, %v; want 0, nil (stale)", pid, err)
			}
			f, err := Write(path)
			if err != nil {
				t.Fatalf("Write over the stale file: %v", err)
			}
			if pid, err := Running(path); pid != os.Getpid() || err != nil {
				t.Errorf("after Write: Running = %d, %v; want %d", pid, err, os.Getpid())
			}
			f.Remove()
		})
	}
}

// A file held by a live daemon but edited to garbage is an error to
// report, not a daemon that is not running.
func TestRunningHeldGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.pid")
	f, err := Write(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Remove()
	os.WriteFile(path, []byte("junk\n"), 0o644)
	if pid, err := Running(path); pid != 0 || err == nil || !strings.Contains(err.Error(), "names no live process") {
		t.Errorf("Running = %d, %v; want an error naming the edit", pid, err)
	}
}

// A link planted at the pid file's path is not followed: root would write
// its pid into, and stop would trust, whatever file it names.
func TestPidFileRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "shadow")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	path := filepath.Join(dir, "gearshift.pid")
	os.Symlink(target, path)
	if p, err := Write(path); err == nil || !strings.Contains(err.Error(), "pid file "+path+" is a symbolic link, not followed") {
		p.Remove()
		t.Errorf("Write through a link = %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("the link's target was written: %q", b)
	}
	if _, err := Running(path); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Errorf("Running through a link = %v", err)
	}
}

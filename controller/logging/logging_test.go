package logging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestFileReopenAndFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log", "gearshift.log") // log/ does not exist yet
	lf, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	var console strings.Builder
	log := New(lf, &console, zap.NewAtomicLevelAt(zap.InfoLevel))

	log.Info("state change", zap.String("from", "light"), zap.String("to", "heavy"))
	log.Debug("not at info")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	log.Info("still to the renamed file")
	if err := lf.Reopen(); err != nil {
		t.Fatal(err)
	}
	log.Warn("after reopen")

	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if n := strings.Count(string(old), "\n"); n != 2 || strings.Contains(string(old), "not at info") {
		t.Errorf("rotated file:\n%s", old)
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(strings.Split(string(old), "\n")[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e["msg"] != "state change" || e["level"] != "info" || e["from"] != "light" || e["ts"] == nil {
		t.Errorf("entry = %v", e)
	}
	if !strings.Contains(string(cur), `"msg":"after reopen"`) || strings.Count(string(cur), "\n") != 1 {
		t.Errorf("new file:\n%s", cur)
	}
	if !strings.Contains(console.String(), "state change") || strings.Contains(console.String(), `"msg"`) {
		t.Errorf("console copy:\n%s", console.String())
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("log file mode %v, want 0640", fi.Mode().Perm())
	}
}

func TestParseLevel(t *testing.T) {
	for in, ok := range map[string]bool{"": true, "debug": true, "info": true, "warn": true, "error": true, "loud": false} {
		if _, err := ParseLevel(in); (err == nil) != ok {
			t.Errorf("ParseLevel(%q) = %v", in, err)
		}
	}
}

// A disk that is full: the writes fail, Health says why and counts them,
// and a write that works again clears the problem but not the count.
func TestFileHealth(t *testing.T) {
	lf, err := OpenFile("/dev/full")
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if p, n := lf.Health(); p != "" || n != 0 {
		t.Fatalf("fresh file: %q, %d", p, n)
	}
	for i := 0; i < 3; i++ {
		lf.Write([]byte("{}\n"))
	}
	if p, n := lf.Health(); !strings.Contains(p, "write /dev/full: no space left on device") || n != 3 {
		t.Errorf("after 3 writes to a full disk: %q, %d", p, n)
	}
	lf.mu.Lock()
	lf.path = filepath.Join(t.TempDir(), "gearshift.log")
	lf.mu.Unlock()
	if err := lf.Reopen(); err != nil {
		t.Fatal(err)
	}
	lf.Write([]byte("{}\n"))
	if p, n := lf.Health(); p != "" || n != 3 {
		t.Errorf("after a write that worked: %q, %d; want no problem, still 3 counted", p, n)
	}
}

// A link planted at log.file is refused at start, and at a reopen after
// logrotate: the daemon keeps writing the old file and Health says why.
func TestLogFileRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "shadow")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	path := filepath.Join(dir, "gearshift.log")
	os.Symlink(target, path)
	if lf, err := OpenFile(path); err == nil || !strings.Contains(err.Error(), path+": is a symbolic link, not followed") {
		if lf != nil {
			lf.Close()
		}
		t.Fatalf("OpenFile of a link = %v", err)
	}
	os.Remove(path)
	lf, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	os.Rename(path, path+".1")
	os.Symlink(target, path)
	if err := lf.Reopen(); err == nil {
		t.Fatal("Reopen followed a link")
	}
	if problem, _ := lf.Health(); !strings.Contains(problem, "reopen "+path+": is a symbolic link, not followed") {
		t.Errorf("Health = %q", problem)
	}
	lf.Write([]byte("still here\n"))
	if b, _ := os.ReadFile(path + ".1"); string(b) != "still here\n" {
		t.Errorf("the old file got %q", b)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("the link's target was written: %q", b)
	}
}

package pidfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRunningRemove(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "gearshift.pid")
	if pid, err := Running(path); pid != 0 || err != nil {
		t.Fatalf("no file: Running = %d, %v; want 0, nil", pid, err)
	}
	if err := Write(path); err != nil {
		t.Fatal(err)
	}
	// This very binary counts as gearshift.
	if pid, err := Running(path); pid != os.Getpid() || err != nil {
		t.Errorf("Running = %d, %v; want %d", pid, err, os.Getpid())
	}
	if err := Write(path); err != nil {
		t.Errorf("rewriting its own pid file: %v", err)
	}
	Remove(path)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("pid file still there after Remove: %v", err)
	}
}

func TestRunningReadsOnlyPids(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		wantErr    string
	}{
		{"empty: being written", "", ""},
		{"a dead pid is stale", "999999999\n", ""},
		{"not a number", "gearshift\n", "does not hold a process id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "p.pid")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			pid, err := Running(path)
			if pid != 0 || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Running = %d, %v; want 0 and error %q", pid, err, tc.wantErr)
			}
			// Remove leaves a file that is not this process's.
			Remove(path)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("Remove deleted another process's pid file: %v", err)
			}
		})
	}
}

// Package pidfile is the daemon's pid file: written at start, removed at
// exit, and read by the commands that find, signal or wait for the daemon.
package pidfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// read returns the pid in the file at path; 0 when the file is empty
// (being written).
func read(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s does not hold a process id: %q", path, s)
	}
	return pid, nil
}

// Write writes this process's pid to path, creating its directory. It fails
// when the file names another live gearshift process. An empty path is no
// pid file.
func Write(path string) error {
	if path == "" {
		return nil
	}
	if pid, err := Running(path); err == nil && pid > 0 && pid != os.Getpid() {
		return fmt.Errorf("gearshift is already running (pid %d, pid file %s)", pid, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create pid file directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// Remove removes path if it still holds this process's pid.
func Remove(path string) {
	if path == "" {
		return
	}
	if pid, err := read(path); err == nil && pid == os.Getpid() {
		os.Remove(path)
	}
}

// Running returns the pid of the gearshift daemon named by the pid file,
// or 0 when none runs (no file, or a stale one whose process is gone or is
// not gearshift: the pid may have been reused).
func Running(path string) (int, error) {
	pid, err := read(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	if err != nil || pid == 0 {
		return 0, err
	}
	if !IsGearshift(pid) {
		return 0, nil
	}
	return pid, nil
}

// Signal sends sig to the daemon named by the pid file and returns its pid;
// 0 when none runs.
func Signal(path string, sig syscall.Signal) (int, error) {
	pid, err := Running(path)
	if err != nil || pid == 0 {
		return 0, err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return 0, nil
		}
		return pid, fmt.Errorf("send %s to pid %d: %w", sigName(sig), pid, err)
	}
	return pid, nil
}

// WaitExit waits until process pid is gone, at most timeout.
func WaitExit(ctx context.Context, pid int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if !Alive(pid) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("is still running after %s", timeout)
		case <-tick.C:
		}
	}
}

// Alive tells whether process pid exists and is not a zombie.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S …".
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// IsGearshift tells whether process pid is alive and is a gearshift
// daemon: it runs this very binary (also once replaced by an upgrade), or
// its executable's or argv[0]'s name says gearshift. Other arguments do not
// count, so a pid reused by, say, a shell given "gearshift" as an argument
// is not taken for the daemon. When /proc cannot tell, the answer is no:
// nothing is signalled, and a second daemon is still refused by the
// control socket.
func IsGearshift(pid int) bool {
	if !Alive(pid) {
		return false
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
		exe = strings.TrimSuffix(exe, " (deleted)")
		if self, err := os.Executable(); err == nil && exe == self {
			return true
		}
		if strings.Contains(filepath.Base(exe), "gearshift") {
			return true
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false // gone meanwhile
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return strings.Contains(filepath.Base(argv0), "gearshift")
}

func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	}
	return sig.String()
}

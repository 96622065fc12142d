// Package pidfile is the daemon's pid file: written at start, locked for
// the daemon's lifetime, removed at exit, and read by the commands that
// find, signal or wait for the daemon. The lock, not the process name, says
// a daemon runs: a pid file nobody holds is stale, whatever it contains.
package pidfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockWait bounds how long Write waits for a lock held by a reader's brief
// probe (Running) rather than by a daemon.
const lockWait = 500 * time.Millisecond

// File is the pid file of the running daemon: locked (flock) from Write
// until Remove, so that readers can tell it from a stale one.
type File struct {
	path string
	f    *os.File
}

// parse returns the pid in a pid file's text; 0 for an empty or garbage
// text, which start-stop-daemon also takes for stale.
func parse(b []byte) int {
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Write creates or takes over the pid file at path, creating its
// directory, locks it for this process's lifetime and writes this
// process's pid into it. It fails when a live daemon holds the file. An
// empty path is no pid file (a nil *File).
func Write(path string) (*File, error) {
	if path == "" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create pid file directory: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		// Not through a link: root would write, and stop would later
		// trust, whatever file a link planted here names.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return nil, openError(path, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			f.Close()
			if time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if pid := parse(b); pid > 0 {
				return nil, fmt.Errorf("gearshift is already running (pid %d, pid file %s)", pid, path)
			}
			return nil, fmt.Errorf("gearshift is already running (pid file %s is locked)", path)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock pid file %s: %w", path, err)
		}
		// A daemon exiting meanwhile removes the file it held: the lock is
		// then on a file no one else will find. Start again on the new one.
		if !samePath(f, path) {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, fmt.Errorf("write pid file: %w", err)
		}
		if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("write pid file: %w", err)
		}
		return &File{path: path, f: f}, nil
	}
}

// openError words a failure to open the pid file; a symbolic link there
// is refused (O_NOFOLLOW), and said so.
func openError(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("pid file %s is a symbolic link, not followed: remove it (gearshift writes the pid file itself)", path)
	}
	return fmt.Errorf("open pid file: %w", err)
}

// samePath tells whether the open file f is still the one at path.
func samePath(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, pi)
}

// Remove removes the pid file and releases its lock. A nil File is none.
func (p *File) Remove() {
	if p == nil {
		return
	}
	if samePath(p.f, p.path) {
		os.Remove(p.path)
	}
	p.f.Close()
}

// Running returns the pid of the gearshift daemon holding the pid file,
// or 0 when none runs: no file, or a stale one that no process holds
// locked (its daemon is gone; the pid in it may have been reused, it may
// hold garbage). A held file that is still empty (being written) is 0 too.
func Running(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, openError(path, err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		return 0, nil // nobody holds it: stale
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return 0, fmt.Errorf("probe the lock of pid file %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	if pid := parse(b); pid > 0 && Alive(pid) {
		return pid, nil
	}
	if strings.TrimSpace(string(b)) == "" {
		return 0, nil
	}
	return 0, fmt.Errorf("pid file %s is held by a running daemon but names no live process (%q): was it edited?", path, strings.TrimSpace(string(b)))
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

package main

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

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/profiles"
)

func newStopCmd(a *app) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon (SIGTERM through the pid file) and wait for it to exit",
		Long: `Send SIGTERM to the daemon named by the pid file and wait until it has exited,
having applied on_exit to the Varnish targets. Stopping a daemon that is not
running succeeds, saying so.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return a.stop(ctxOrBackground(cmd.Context()), timeout)
		}),
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the daemon to exit")
	return cmd
}

func (a *app) stop(ctx context.Context, timeout time.Duration) (int, error) {
	if timeout <= 0 {
		return exitUsage, fmt.Errorf("--timeout must be positive, got %s", timeout)
	}
	cfg, _ := a.daemonConfig() // a config being edited must not keep the daemon from stopping
	pid, err := signalDaemon(cfg, syscall.SIGTERM)
	if err != nil {
		return exitFailure, err
	}
	if pid == 0 {
		fmt.Fprintf(a.stdout, "gearshift is not running (no live process in %s)\n", cfg.PIDFile)
		return exitOK, nil
	}
	if err := waitExit(ctx, pid, timeout); err != nil {
		return exitFailure, fmt.Errorf("gearshift (pid %d) %w; it may still be applying on_exit: see `gearshift logs`, or kill -KILL %d", pid, err, pid)
	}
	fmt.Fprintf(a.stdout, "gearshift stopped (pid %d)\n", pid)
	return exitOK, nil
}

// waitExit waits until process pid is gone.
func waitExit(ctx context.Context, pid int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if !processAlive(pid) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("is still running after %s", timeout)
		case <-tick.C:
		}
	}
}

// processAlive tells whether process pid exists and is not a zombie.
func processAlive(pid int) bool {
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

// runningPID returns the pid of the gearshift daemon named by the pid file,
// or 0 when none runs (no file, or a stale one whose process is gone or is
// not gearshift: the pid may have been reused).
func runningPID(pidFile string) (int, error) {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read pid file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, nil // being written
	}
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s does not hold a process id: %q", pidFile, s)
	}
	if !isGearshift(pid) {
		return 0, nil
	}
	return pid, nil
}

// isGearshift tells whether process pid is alive and is a gearshift
// daemon: it runs this very binary (also once replaced by an upgrade), or
// its executable's or argv[0]'s name says gearshift. Other arguments do not
// count, so a pid reused by, say, a shell given "gearshift" as an argument
// is not taken for the daemon. When /proc cannot tell, the answer is no:
// nothing is signalled, and a second daemon is still refused by the
// control socket.
func isGearshift(pid int) bool {
	if !processAlive(pid) {
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

// signalDaemon sends sig to the daemon named by the config's pid file and
// returns its pid; 0 when none runs.
func signalDaemon(cfg *profiles.Config, sig syscall.Signal) (int, error) {
	pid, err := runningPID(cfg.PIDFile)
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

func withoutEnv(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

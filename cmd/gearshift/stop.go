package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/pidfile"
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
	pid, err := pidfile.Signal(cfg.PIDFile, syscall.SIGTERM)
	if err != nil {
		return exitFailure, err
	}
	if pid == 0 {
		fmt.Fprintf(a.stdout, "gearshift is not running (no live process in %s)\n", cfg.PIDFile)
		return exitOK, nil
	}
	if err := pidfile.WaitExit(ctx, pid, timeout); err != nil {
		return exitFailure, fmt.Errorf("gearshift (pid %d) %w; it may still be applying on_exit: see `gearshift logs`, or kill -KILL %d", pid, err, pid)
	}
	fmt.Fprintf(a.stdout, "gearshift stopped (pid %d)\n", pid)
	return exitOK, nil
}

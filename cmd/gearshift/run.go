package main

import (
	"errors"

	godaemon "github.com/sevlyar/go-daemon"
	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/cmd/gearshift/daemon"
	"github.com/gearshift/gearshift/controller/config"
)

func newRunCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the daemon in the foreground (systemd Type=notify); logs also go to stderr",
		Long: `Run the daemon in the foreground: poll the server's vitals, choose a gear,
keep every Varnish target on that gear's VCL, and answer on the control socket.

Signals: SIGHUP reloads the config and profiles (the old ones stay on error),
SIGUSR1 reopens the log file (logrotate), SIGTERM and SIGINT stop cleanly
(applying on_exit). Under systemd (NOTIFY_SOCKET set) it reports READY=1 and
STATUS=gear <state>.`,
		Args: cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			cfg, err := a.loadConfig()
			if err != nil {
				return exitUsage, err
			}
			return runDaemon(a, cfg, true)
		}),
	}
}

// runDaemon runs the daemon with cfg until SIGTERM or SIGINT and returns
// the exit code: 0 after a clean stop, 2 for a config the daemon cannot use
// (log level, profiles), 1 when it cannot start (log file, pid file, socket,
// another daemon running). logToStderr copies the log to a.stderr in a
// human format (`run`; a detached daemon passes false).
func runDaemon(a *app, cfg *config.Config, logToStderr bool) (int, error) {
	opts := daemon.Options{LoadConfig: a.loadConfig, Detached: godaemon.WasReborn()}
	if logToStderr {
		opts.Console = a.stderr
	}
	err := daemon.Run(cfg, opts)
	switch {
	case err == nil:
		return exitOK, nil
	case errors.Is(err, daemon.ErrConfig):
		return exitUsage, err
	}
	return exitFailure, err
}

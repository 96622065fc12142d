package main

import (
	"fmt"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/pidfile"
)

func newReloadCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Make the daemon re-read its config and profiles (SIGHUP through the pid file)",
		Long: `Validate the config, then send SIGHUP to the daemon named by the pid file.
The daemon loads the new config and profiles into Varnish before switching to
them; if that fails the old ones stay in force, and status and check report
the error. When the config does not validate, nothing is sent: fix it first.`,
		Args: cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			cfg, invalid := a.daemonConfig()
			if invalid != nil {
				return exitUsage, fmt.Errorf("%w\nnot reloading: the daemon would refuse this config and keep the old one", invalid)
			}
			pid, err := pidfile.Signal(cfg.PIDFile, syscall.SIGHUP)
			if err != nil {
				return exitFailure, err
			}
			if pid == 0 {
				return exitFailure, fmt.Errorf("gearshift is not running (no live process in %s); start it with `gearshift start`", cfg.PIDFile)
			}
			fmt.Fprintf(a.stdout, "sent SIGHUP to gearshift (pid %d); `gearshift status` shows config_error if the new config is refused\n", pid)
			return exitOK, nil
		}),
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/pidfile"
)

// reloadWait bounds how long reload waits for the daemon's answer: a
// compile of three profiles on every target, with room to spare.
const reloadWait = 3 * time.Minute

func newReloadCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Make the daemon re-read its config and profiles, and wait for the outcome",
		Long: `Validate the config's settings (the admin secret and other files are
the daemon's to read), then ask the daemon named by the pid file to reload
(POST /v1/reload on its control socket, as SIGHUP does) and wait for the
outcome; a daemon that does not answer on the socket gets SIGHUP through the
pid file. The daemon loads the new config and profiles into Varnish before
switching to them; if that fails the old ones stay in force and reload exits
1 with the reason. When the config does not validate, nothing is sent: fix
it first.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			// Judged on its settings alone: the admin secret is the
			// daemon's to read (a member of control.admin_group may not),
			// and the daemon's answer is the verdict.
			cfg, invalid := a.checkConfig()
			if invalid != nil {
				return exitUsage, fmt.Errorf("%w\nnot reloading: the daemon would refuse this config and keep the old one", invalid)
			}
			pid, err := pidfile.Running(cfg.PIDFile)
			if err != nil {
				return exitFailure, err
			}
			if pid == 0 {
				return exitFailure, fmt.Errorf("gearshift is not running (no live process in %s); start it with `gearshift start`", cfg.PIDFile)
			}
			ctx, cancel := context.WithTimeout(ctxOrBackground(cmd.Context()), reloadWait)
			defer cancel()
			s, err := api.NewClient(cfg.Control.Socket).Reload(ctx)
			if errors.Is(err, api.ErrUnreachable) && !errors.Is(err, os.ErrPermission) {
				// No socket to ask (a daemon started before the socket
				// moved, say): SIGHUP does the same, without an answer.
				if pid, err := pidfile.Signal(cfg.PIDFile, syscall.SIGHUP); err != nil || pid == 0 {
					return exitFailure, fmt.Errorf("gearshift (pid file %s) does not answer on %s and could not be sent SIGHUP: %v", cfg.PIDFile, cfg.Control.Socket, err)
				}
				fmt.Fprintf(a.stdout, "sent SIGHUP to gearshift (pid %d): it does not answer on %s, so the outcome is in `gearshift status` (config_error) and its log\n", pid, cfg.Control.Socket)
				return exitOK, nil
			}
			var ae *api.APIError
			if errors.As(err, &ae) && ae.StatusCode == 422 {
				return exitFailure, fmt.Errorf("the daemon refused the new config and keeps the old one in force: %s", ae.Message)
			}
			if err != nil {
				code, err := clientFailure(err)
				return max(code, exitFailure), err
			}
			fmt.Fprintf(a.stdout, "gearshift reloaded (pid %d): gear %s, %s\n", pid, s.State, s.Mode)
			return exitOK, nil
		}),
	}
}

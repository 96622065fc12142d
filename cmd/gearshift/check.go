package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/pidfile"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/offline/health"
)

// defaultStartWait bounds how long start (and check --restart) waits for a
// new daemon to answer on its socket: it loads three VCL programs into every
// target first.
const defaultStartWait = 60 * time.Second

func newCheckCmd(a *app) *cobra.Command {
	var o health.Options
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Health check with monitoring-plugin exit codes (Nagios, Icinga, cron)",
		Long: `Check the running daemon and print one line:
  GEARSHIFT <STATUS> - <summary> | <perfdata>
Exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.

CRITICAL: the daemon is not running or its socket is silent past --timeout; a
Varnish target is unreachable or not in sync; the last sample is older than
--max-age.
WARNING: a config reload failed (the old config stays in force); the config
file does not validate (the next start or reload would fail); gearshift's VCL
was changed outside gearshift (and put back) in the last hour; the gear is
pinned and --warn-forced is given; the gear is one of --warn-state; the daemon
was restarted by --restart.
UNKNOWN: bad flags, or the check itself ran past --timeout.

With --restart a daemon that is not running is started (gearshift start). On a
host where systemd manages gearshift.service, --restart leaves restarting to
systemd and only reports.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprintf(a.stdout, "GEARSHIFT UNKNOWN - check takes no arguments, got %q\n", args)
				return &exitError{code: health.Unknown, err: errors.New("")}
			}
			return nil
		},
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return a.check(ctxOrBackground(cmd.Context()), o)
		}),
	}
	// Bad flags are UNKNOWN to a monitoring system, not a usage error.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		fmt.Fprintf(a.stdout, "GEARSHIFT UNKNOWN - %v\n", err)
		return &exitError{code: health.Unknown, err: errors.New("")}
	})
	f := cmd.Flags()
	f.DurationVar(&o.Timeout, "timeout", 5*time.Second, "CRITICAL when the daemon's socket is silent this long; UNKNOWN when the check itself runs past it")
	f.DurationVar(&o.MaxAge, "max-age", 30*time.Second, "CRITICAL when the daemon's last sample is older")
	f.StringArrayVar(&o.WarnStates, "warn-state", nil, "WARNING while the gear is this state ("+strings.Join(state.Names(), ", ")+"; repeatable)")
	f.BoolVar(&o.WarnForced, "warn-forced", false, "WARNING while the gear is pinned (gearshift force)")
	f.BoolVar(&o.Restart, "restart", false, "start the daemon when it is not running, and report WARNING restarted")
	f.BoolVar(&o.Quiet, "quiet", false, "print nothing when OK (cron mails only problems)")
	return cmd
}

func (a *app) check(ctx context.Context, o health.Options) (int, error) {
	if err := o.Validate(); err != nil {
		fmt.Fprintf(a.stdout, "GEARSHIFT UNKNOWN - %v\n", err)
		return health.Unknown, nil
	}
	cfg, cfgErr := a.checkConfig()
	exe, _ := os.Executable()
	c := &health.Checker{
		Opts:       o,
		Config:     cfg,
		ConfigErr:  cfgErr,
		ConfigPath: a.configFile().Describe(),
		Client:     api.NewClient(cfg.Control.Socket),
		Now:        time.Now,
		Running:    func() (int, error) { return pidfile.Running(cfg.PIDFile) },
		Start:      func(ctx context.Context) error { return health.StartDetached(ctx, exe, a.configPath, a.configSet) },
		Systemd:    health.SystemdManages,
		LockPath:   filepath.Join(filepath.Dir(cfg.PIDFile), "check.lock"),
		StartWait:  defaultStartWait,
		Margin:     time.Second,
	}
	return c.Run(ctx, a.stdout), nil
}

// checkConfig is the config of check and reload: see config.File.LoadForCheck.
// reload judges the file as check does before it asks the daemon (whose
// answer is the verdict): a member of control.admin_group may not read
// the admin secret either.
func (a *app) checkConfig() (*config.Config, error) { return a.configFile().LoadForCheck() }

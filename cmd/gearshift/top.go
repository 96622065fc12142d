package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/top"
)

func newTopCmd(a *app) *cobra.Command {
	var by, target string
	var d time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show what reaches the backend, and why, live from a target's log",
		Long: `Read the backend requests of a Varnish on this machine (varnish.targets[].name,
varnishd's -n) from its log, with the reason word gearshift's profiles give
each, and show the busiest by URL pattern, reason, cookie or client, every
second; with --json, one snapshot after --for. Needs root or the varnish
group. The reason words: docs/reasons.md.`,
		Example: "  gearshift top --by url\n  gearshift top --for 10s --json",
		Args:    cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			b, err := top.ParseBy(by)
			if err != nil {
				return exitUsage, err
			}
			cfg, err := a.loadConfigOffline()
			if err != nil {
				return exitUsage, err
			}
			name, err := top.TargetName(cfg.Varnish.Targets, target)
			if err != nil {
				return exitUsage, err
			}
			ctx, stop := signal.NotifyContext(ctxOrBackground(cmd.Context()), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := top.Print(ctx, top.Log{Name: name}, b, d, asJSON, a.stdout); err != nil {
				return exitFailure, err
			}
			return exitOK, nil
		}),
	}
	cmd.Flags().StringVar(&by, "by", "reason", "group by url, reason, cookie or client")
	cmd.Flags().DurationVar(&d, "for", 0, "stop after this long (with --json: 10s)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one snapshot as JSON after --for")
	cmd.Flags().StringVar(&target, "target", "", "the varnish.targets[].name to read (default: the first with a name)")
	return cmd
}

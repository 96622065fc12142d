package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/state"
)

func newForceCmd(a *app) *cobra.Command {
	var forStr, site string
	cmd := &cobra.Command{
		Use:   "force " + state.OneOf("|"),
		Short: "Pin a gear, for a while (--for) or until `gearshift auto`, on every site or one (--site)",
		Example: `  gearshift force heavy --for 30m    # ride out a known surge
  gearshift force heavy --site shop  # the shop's sale: its neighbours keep their gears
  gearshift force light              # debugging: pass everything, until auto`,
		ValidArgs: state.Names(),
		Args:      cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) (int, error) {
			st, err := state.Parse(args[0])
			if err != nil {
				return exitUsage, err
			}
			d, err := api.ParseForceDuration(forStr)
			if err != nil {
				return exitUsage, fmt.Errorf("--for: %w", err)
			}
			socket, _ := a.controlSocket()
			ctx, cancel := context.WithTimeout(ctxOrBackground(cmd.Context()), 90*time.Second)
			defer cancel()
			s, err := api.NewClient(socket).Force(ctx, site, st, d)
			if err != nil {
				return clientFailure(err)
			}
			return printApplied(a.stdout, s, site)
		}),
	}
	// pflag takes the backticked word as the value's name in --help.
	cmd.Flags().StringVar(&forStr, "for", "", "pin the gear for `duration` (e.g. 30m); without it, until \"gearshift auto\"")
	a.siteFlag(cmd, &site, "pin the gear of this site alone; without it, of every site")
	return cmd
}

// printApplied prints the gear the daemon is in after a force or auto
// (of site alone, when not ""), and fails when a target did not follow.
func printApplied(w io.Writer, s *api.Status, site string) (int, error) {
	if site != "" {
		if bad := s.WriteSiteApplied(w, site); len(bad) > 0 {
			return exitFailure, fmt.Errorf("varnish %v did not put site %s in its gear; the daemon keeps retrying", bad, site)
		}
		return exitOK, nil
	}
	if bad := s.WriteApplied(w); len(bad) > 0 {
		return exitFailure, fmt.Errorf("varnish %v did not switch to %s; the daemon keeps retrying", bad, s.State)
	}
	return exitOK, nil
}

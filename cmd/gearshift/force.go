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
	var forStr string
	cmd := &cobra.Command{
		Use:   "force " + state.OneOf("|"),
		Short: "Pin a gear, for a while (--for) or until `gearshift auto`",
		Example: `  gearshift force heavy --for 30m   # ride out a known surge
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
			s, err := api.NewClient(socket).Force(ctx, "", st, d)
			if err != nil {
				return clientFailure(err)
			}
			return printApplied(a.stdout, s)
		}),
	}
	// pflag takes the backticked word as the value's name in --help.
	cmd.Flags().StringVar(&forStr, "for", "", "pin the gear for `duration` (e.g. 30m); without it, until \"gearshift auto\"")
	return cmd
}

// printApplied prints the gear the daemon is in after a force or auto, and
// fails when a target did not follow.
func printApplied(w io.Writer, s *api.Status) (int, error) {
	if bad := s.WriteApplied(w); len(bad) > 0 {
		return exitFailure, fmt.Errorf("varnish %v did not switch to %s; the daemon keeps retrying", bad, s.State)
	}
	return exitOK, nil
}

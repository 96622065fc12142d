package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
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
			s, err := api.NewClient(socket).Force(ctx, st, d)
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
	switch {
	case s.Mode == "forced" && s.ForcedUntil != nil:
		fmt.Fprintf(w, "gear %s, forced until %s\n", s.State, s.ForcedUntil.Local().Format(timefmt.Stamp))
	case s.Mode == "forced":
		fmt.Fprintf(w, "gear %s, forced until `gearshift auto`\n", s.State)
	default:
		fmt.Fprintf(w, "gear %s, auto: %s\n", s.State, s.Reason)
	}
	var bad []string
	for _, t := range s.Targets {
		if t.InSync {
			// In label mode the gear is the label's VCL; the active VCL
			// is the operator's own.
			vcl := t.ActiveVCL
			if s.VarnishMode == "label" {
				vcl = t.LabelVCL
			}
			fmt.Fprintf(w, "  %s: %s (%.2f ms)\n", t.Admin, vcl, t.LastSwitchMS)
			continue
		}
		fmt.Fprintf(w, "  %s: NOT IN SYNC: %s\n", t.Admin, cmp.Or(t.Error, "(none)"))
		bad = append(bad, t.Admin)
	}
	if len(bad) > 0 {
		return exitFailure, fmt.Errorf("varnish %v did not switch to %s; the daemon keeps retrying", bad, s.State)
	}
	return exitOK, nil
}

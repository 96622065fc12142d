package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
)

func newAutoCmd(a *app) *cobra.Command {
	var site string
	cmd := &cobra.Command{
		Use:   "auto",
		Short: "Release a pinned gear: the daemon chooses again from the load",
		Long: `Release a pinned gear: the daemon chooses again from the load. Without
--site every pin is released, the pins of single sites too; with it, that
site's alone (a pin of every site still holds it).`,
		Example: `  gearshift auto               # every pin
  gearshift auto --site shop   # the shop's pin alone`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			socket, _ := a.controlSocket()
			ctx, cancel := context.WithTimeout(ctxOrBackground(cmd.Context()), 90*time.Second)
			defer cancel()
			s, err := api.NewClient(socket).Auto(ctx, site)
			if err != nil {
				return clientFailure(err)
			}
			return printApplied(a.stdout, s, site)
		}),
	}
	a.siteFlag(cmd, &site, "release this site's pin alone; without it, every pin")
	return cmd
}

package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
)

func newAutoCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "auto",
		Short: "Release a pinned gear: the daemon chooses again from the load",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			socket, _ := a.controlSocket()
			ctx, cancel := context.WithTimeout(ctxOrBackground(cmd.Context()), 90*time.Second)
			defer cancel()
			s, err := api.NewClient(socket).Auto(ctx, "")
			if err != nil {
				return clientFailure(err)
			}
			return printApplied(a.stdout, s)
		}),
	}
}

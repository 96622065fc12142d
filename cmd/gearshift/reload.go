package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the reload command lands.
func newReloadCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "reload",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("reload is not implemented yet")
		}),
	}
}

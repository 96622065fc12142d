package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the force command lands.
func newForceCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "force",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("force is not implemented yet")
		}),
	}
}

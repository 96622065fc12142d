package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the run command lands.
func newRunCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "run",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("run is not implemented yet")
		}),
	}
}

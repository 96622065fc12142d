package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the stop command lands.
func newStopCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "stop",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("stop is not implemented yet")
		}),
	}
}

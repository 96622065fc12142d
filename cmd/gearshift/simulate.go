package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the simulate command lands.
func newSimulateCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "simulate",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("simulate is not implemented yet")
		}),
	}
}

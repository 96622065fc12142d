package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the status command lands.
func newStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "status",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("status is not implemented yet")
		}),
	}
}

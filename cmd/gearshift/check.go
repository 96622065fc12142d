package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the check command lands.
func newCheckCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "check",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("check is not implemented yet")
		}),
	}
}

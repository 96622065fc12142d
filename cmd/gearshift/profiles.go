package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the profiles command lands.
func newProfilesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "profiles",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("profiles is not implemented yet")
		}),
	}
}

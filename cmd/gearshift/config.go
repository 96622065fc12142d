package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the config command lands.
func newConfigCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "config",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("config is not implemented yet")
		}),
	}
}

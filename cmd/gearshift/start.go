package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the start command lands.
func newStartCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "start",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("start is not implemented yet")
		}),
	}
}

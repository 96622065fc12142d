package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the logs command lands.
func newLogsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "logs",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("logs is not implemented yet")
		}),
	}
}

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// STUB: replaced when the auto command lands.
func newAutoCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "auto",
		Hidden: true,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return exitFailure, errors.New("auto is not implemented yet")
		}),
	}
}

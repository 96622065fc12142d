package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller"
)

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gearshift's version",
		Args:  cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			fmt.Fprintf(a.stdout, "gearshift %s (%s, %s/%s)\n", controller.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return exitOK, nil
		}),
	}
}

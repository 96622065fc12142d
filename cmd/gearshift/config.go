package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/config"
)

func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Validate the config or print the effective config",
		Long: `Validate the config file (--config, default /etc/gearshift/gearshift.yaml) or
print the effective config: the file over the embedded defaults. When the
default file does not exist, the embedded defaults are what applies.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Validate the config; exit 2 with every problem, each with its key path",
		Args:  cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			cfg, err := a.loadConfig()
			if err != nil {
				// Every problem on its own line, as they are, for editors and grep.
				fmt.Fprintf(a.stderr, "gearshift: %v\n", err)
				return exitUsage, nil
			}
			// Risky but working: said, and the config is still OK.
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(a.stderr, "gearshift: warning: %s\n", w)
			}
			// What only a read tells: a source that answers wrong is a
			// problem; one not answering now (php-fpm stopped) a warning.
			ctx, cancel := context.WithTimeout(context.Background(), config.ReachTimeout)
			problems, absent := cfg.Reach(ctx)
			cancel()
			for _, w := range absent {
				fmt.Fprintf(a.stderr, "gearshift: warning: %s\n", w)
			}
			if len(problems) > 0 {
				file := a.configFile()
				err := &config.Error{Problems: problems}
				if !file.Defaults() {
					err.File = file.Path
				}
				fmt.Fprintf(a.stderr, "gearshift: %v\n", err)
				return exitUsage, nil
			}
			fmt.Fprintf(a.stdout, "config OK: %s\n", a.configFile().Describe())
			return exitOK, nil
		}),
	}, &cobra.Command{
		Use:   "show",
		Short: "Print the effective config (the file over the defaults) as YAML",
		Args:  cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			cfg, err := a.loadConfig()
			if err != nil {
				return exitUsage, err
			}
			b, err := cfg.YAML()
			if err != nil {
				return exitFailure, fmt.Errorf("print config: %w", err)
			}
			fmt.Fprintf(a.stdout, "# effective gearshift config: %s\n", a.configFile().Describe())
			a.stdout.Write(b)
			return exitOK, nil
		}),
	})
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// Exit codes (docs/operating.md#commands). `check` has its own
// (monitoring-plugin) codes.
const (
	exitOK      = 0
	exitFailure = 1 // runtime failure: daemon unreachable, Varnish refused
	exitUsage   = 2 // usage or config error
)

// exitError carries the exit code a command chose along with its error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// app is what every subcommand shares: its streams and the global flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	configPath     string
	configSet      bool // --config given explicitly
}

// Main runs gearshift with args and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(a)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	code := exitUsage
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "gearshift: %s\n", sentence(msg))
	}
	return code
}

// sentence makes an error message read as one sentence.
func sentence(msg string) string {
	msg = strings.TrimSpace(msg)
	// cobra appends its suggestions for a mistyped command on lines of their own.
	if head, alt, ok := strings.Cut(msg, "\n\nDid you mean this?\n"); ok {
		msg = head + "; did you mean " + strings.Join(strings.Fields(alt), " or ") + "?"
	}
	if !strings.HasSuffix(msg, ".") && !strings.HasSuffix(msg, "?") {
		msg += "."
	}
	return msg
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "gearshift",
		Short: "Shift Varnish between caching gears as the server's load changes",
		Long: `gearshift watches the server's vitals (load, run queue, memory, pressure)
and switches Varnish between preloaded VCL profiles, one per gear - ` + state.OneOf("and") + ` -
through Varnish's admin port, with hysteresis so it never flaps.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			a.configSet = cmd.Flags().Changed("config")
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.PersistentFlags().StringVar(&a.configPath, "config", config.DefaultPath, "config file (embedded defaults apply when the default file is absent)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	root.AddCommand(
		newRunCmd(a),
		newStartCmd(a),
		newStopCmd(a),
		newReloadCmd(a),
		newStatusCmd(a),
		newForceCmd(a),
		newAutoCmd(a),
		newSitesCmd(a),
		newBanCmd(a),
		newTopCmd(a),
		newPurgeCmd(a),
		newCheckCmd(a),
		newLogsCmd(a),
		newProfilesCmd(a),
		newSimulateCmd(a),
		newTuneCmd(a),
		newReportCmd(a),
		newConfigCmd(a),
		newVersionCmd(a),
		newManpagesCmd(a),
	)
	return root
}

// runE adapts a command body that returns (exit code, error) to cobra.
func runE(fn func(cmd *cobra.Command, args []string) (int, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		code, err := fn(cmd, args)
		if code == exitOK && err == nil {
			return nil
		}
		if err == nil {
			err = errors.New("")
		}
		return &exitError{code: code, err: err}
	}
}

// configFile is the config the command uses: --config, or the default.
func (a *app) configFile() config.File { return config.File{Path: a.configPath, Given: a.configSet} }

func (a *app) loadConfig() (*config.Config, error)        { return a.configFile().Load() }
func (a *app) loadConfigOffline() (*config.Config, error) { return a.configFile().LoadOffline() }
func (a *app) daemonConfig() (*config.Config, error)      { return a.configFile().LoadForDaemon() }

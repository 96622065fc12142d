package main

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/offline/replay"
	"github.com/gearshift/gearshift/internal/timefmt"
)

func newSimulateCmd(a *app) *cobra.Command {
	var (
		path   string
		asJSON bool
		cpus   int
		hist   bool
		ho     = replay.RunOptions{Since: replay.DefaultSince}
	)
	cmd := &cobra.Command{
		Use:   "simulate --trace FILE | --history [--since 7d]",
		Short: "Replay a CSV trace, or the recorded history, through the state machine",
		Long: `Replay a CSV trace of samples through the state machine, with the config's
thresholds and hysteresis, and print each transition and the time spent in
each gear. Tune thresholds against last month's load before trusting the daemon.

The trace has a header row. Columns: time (RFC 3339 or seconds) and load1
are required; load5, load15, runnable, cpus and the signals
(` + strings.Join(trace.Columns(config.Default().ShownSignals()), ", ") + `) are optional (an empty cell is a
missing figure). A row without runnable feeds the fast signal with load1. sadf -d output of sar -q
(timestamp, ldavg-1, runq-sz; semicolons) is read as is.

The CPU count comes from the cpus column, else --cpus, else the config's
cpus, else this machine's.

` + replay.Help,
		Example: `  gearshift simulate --trace scripts/traces/surge.csv
  gearshift simulate --trace last-month.csv --config candidate.yaml --json
  sadf -d -- -q | grep -v RESTART | gearshift simulate --trace - --cpus 8
  gearshift simulate --history --since 7d --config candidate.yaml --svg replay.svg`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			for _, f := range []string{"since", "dir", "svg", "png"} {
				if !hist && cmd.Flags().Changed(f) {
					return exitUsage, fmt.Errorf("--%s goes with --history", f)
				}
			}
			switch {
			case hist && path != "":
				return exitUsage, errors.New("--trace and --history exclude each other")
			case hist:
				return a.simulateHistory(ho, asJSON)
			case path == "":
				return exitUsage, errors.New(`required flag(s) "trace" not set`)
			}
			return a.simulate(path, cpus, asJSON)
		}),
	}
	cmd.Flags().StringVar(&path, "trace", "", "CSV trace to replay (- for standard input)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	cmd.Flags().IntVar(&cpus, "cpus", 0, "CPUs of the traced host, for rows without a cpus column (0 = the config's cpus, else this machine's)")
	cmd.Flags().BoolVar(&hist, "history", false, "replay the flight recorder's history under the config and compare")
	cmd.Flags().Var((*timefmt.Duration)(&ho.Since), "since", "with --history: the period replayed, up to now")
	cmd.Flags().StringVar(&ho.Dir, "dir", "", "with --history: the history directory (default: the config's history.dir)")
	cmd.Flags().StringVar(&ho.SVG, "svg", "", "with --history: draw the chart of the period, both gear bands, in this SVG file")
	cmd.Flags().StringVar(&ho.PNG, "png", "", "with --history: draw the chart in this PNG file")
	return cmd
}

// simulateHistory replays the recorded history under the config.
func (a *app) simulateHistory(o replay.RunOptions, asJSON bool) (int, error) {
	cfg, err := a.loadConfigOffline()
	if err != nil {
		return exitUsage, err
	}
	o.Config, o.ConfigName, o.JSON, o.Now, o.Dir = cfg, a.configFile().Describe(), asJSON, time.Now(), cmp.Or(o.Dir, cfg.History.Dir)
	return replayExit(replay.Run(o, a.stdout, a.stderr))
}

func (a *app) simulate(path string, cpus int, asJSON bool) (int, error) {
	cfg, err := a.loadConfigOffline()
	if err != nil {
		return exitUsage, err
	}
	configFrom := a.configPath
	if a.configFile().Defaults() {
		configFrom = "embedded defaults"
	}
	return replayExit(replay.RunTrace(replay.TraceOptions{
		Path: path, Stdin: a.stdin, Config: cfg, ConfigName: configFrom, CPUs: cpus, JSON: asJSON,
	}, a.stdout, a.stderr))
}

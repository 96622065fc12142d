package main

import (
	"cmp"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/report"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/offline/replay"
	"github.com/gearshift/gearshift/internal/timefmt"
)

func newTuneCmd(a *app) *cobra.Command {
	o := replay.TuneOptions{Since: replay.DefaultTuneSince, Within: replay.DefaultWithin, Bounds: replay.DefaultBounds}
	cmd := &cobra.Command{
		Use:     "tune [--since 14d] [--within 30s] [--json]",
		Short:   "Suggest the states: thresholds from the recorded history",
		Long:    replay.TuneHelp,
		Example: "  gearshift tune\n  gearshift tune --since 7d --within 1m --distress-ttfb 800 --json",
		Args:    cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			cfg, err := a.loadConfigOffline()
			if err != nil {
				return exitUsage, err
			}
			o.Config, o.ConfigName, o.Now, o.Dir = cfg, a.configFile().Describe(), time.Now(), cmp.Or(o.Dir, cfg.History.Dir)
			return replayExit(replay.Tune(o, a.stdout, a.stderr))
		}),
	}
	f := cmd.Flags()
	f.Var((*timefmt.Duration)(&o.Since), "since", "the period of history searched, up to now")
	f.StringVar(&o.Dir, "dir", "", "history directory (default: the config's history.dir)")
	f.Var((*timefmt.Duration)(&o.Within), "within", "how soon after a distress period starts heavy must be on")
	f.Float64Var(&o.Bounds[state.LoadBound], "distress-load", o.Bounds[state.LoadBound], "load_per_cpu above which the backend is in distress")
	f.Float64Var(&o.Bounds[state.TTFBBound], "distress-ttfb", o.Bounds[state.TTFBBound], "backend_ttfb_ms above which the backend is in distress")
	f.Float64Var(&o.Bounds[state.BusyBound], "distress-busy", o.Bounds[state.BusyBound], "apache_busy_ratio or phpfpm_busy_ratio above which the backend is in distress")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object instead of the text")
	return cmd
}

// replayExit is the exit code of replay's commands: 2 for a request they
// cannot make sense of, 1 when the history cannot be read.
func replayExit(err error) (int, error) {
	var ue *report.UsageError
	switch {
	case errors.As(err, &ue):
		return exitUsage, err
	case err != nil:
		return exitFailure, err
	}
	return exitOK, nil
}

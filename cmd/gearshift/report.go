package main

import (
	"cmp"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/report"
	"github.com/gearshift/gearshift/internal/timefmt"
)

func newReportCmd(a *app) *cobra.Command {
	var o report.Options
	cmd := &cobra.Command{
		Use:   "report [--since D | --from T --to T]",
		Short: "Tell what the gears did over a period, from the flight recorder's history",
		Long: `Tell what gearshift did over a period (the last 24h by default), from the files
of history.dir alone (the daemon may be stopped): the time in each gear, each
transition and its reason, and each incident (a climb above light until back in
light): time to heavy, peak signals, length, requests served, those that reached
the backend and those that would have without the shift. With sites, which site
surged and when: each incident's sites that left light, when, their share of the
backend's requests and their peak gear, and each site's time in each gear.
--svg or --png draws a chart. --from and --to take RFC 3339 or a local
"2006-01-02 15:04".`,
		Example: `  gearshift report --since 7d --json
  gearshift report --from "2026-12-01 03:00" --to "2026-12-01 05:00" --svg surge.svg
  gearshift report --dir ./web2-history --png day.png`,
		Args: cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) { return a.report(o) }),
	}
	f := cmd.Flags()
	f.Var((*timefmt.Duration)(&o.Since), "since", "report the period of this length up to now (e.g. 12h, 7d)")
	f.Lookup("since").DefValue = timefmt.Duration(report.DefaultSince).String() // the value 0 means it
	f.StringVar(&o.From, "from", "", "start of the period (RFC 3339 or local \"2006-01-02 15:04\")")
	f.StringVar(&o.To, "to", "", "end of the period (default: the last record)")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object instead of the text")
	f.StringVar(&o.SVG, "svg", "", "draw the chart of the period in this SVG file")
	f.StringVar(&o.PNG, "png", "", "draw the chart of the period in this PNG file")
	f.StringVar(&o.Dir, "dir", "", "history directory (default: the config's history.dir)")
	return cmd
}

func (a *app) report(o report.Options) (int, error) {
	cfg, err := a.loadConfigOffline()
	if err != nil {
		return exitUsage, err
	}
	if o.Set, err = cfg.Signals(); err != nil {
		return exitUsage, err
	}
	o.Dir, o.Now = cmp.Or(o.Dir, cfg.History.Dir), time.Now()
	var ue *report.UsageError
	switch err := report.Run(o, a.stdout, a.stderr); {
	case errors.As(err, &ue):
		return exitUsage, err
	case err != nil:
		return exitFailure, err
	}
	return exitOK, nil
}

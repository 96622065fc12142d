package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
)

func newSitesCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sites",
		Short: "List the running daemon's sites: each one's gear, mode, since when, share of the backend and why",
		Long: `List the sites of the running daemon, the default site first, one line
each: its gear, auto or forced (until when), since when it is in that gear,
its share of the server's backend requests over the last minute ("-" while
Varnish's counters cannot be read) and why it is in that gear. Without a
sites key in the config, the default site alone, in the server's gear.`,
		Example: `  gearshift sites
  gearshift sites --json | jq -r '.sites[] | select(.mode == "forced") | .name'`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return a.sites(cmd.Context(), asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"sites": [...]}, the sites of the daemon's /v1/status body`)
	return cmd
}

// sitesJSON is the body of `gearshift sites --json`.
type sitesJSON struct {
	Sites []api.SiteStatus `json:"sites"`
}

func (a *app) sites(ctx context.Context, asJSON bool) (int, error) {
	socket, _ := a.controlSocket()
	ctx, cancel := context.WithTimeout(ctxOrBackground(ctx), 10*time.Second)
	defer cancel()
	st, err := api.NewClient(socket).Status(ctx)
	if err != nil {
		return clientFailure(err)
	}
	if len(st.Sites) == 0 {
		return exitFailure, errors.New("the daemon's status has no sites: it is older than 0.5 (restart it after an upgrade)")
	}
	if asJSON {
		return exitOK, writeJSON(a.stdout, sitesJSON{Sites: st.Sites})
	}
	api.WriteSites(a.stdout, st.Sites, time.Now())
	return exitOK, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

func newStatusCmd(a *app) *cobra.Command {
	var asJSON bool
	var site string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running daemon's gear, why it is in it, its inputs and each Varnish target",
		Example: `  gearshift status
  gearshift status --site shop          # the shop's gear, why, its share of the backend
  gearshift status --site shop --json   # the shop's object of the status's sites`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			if site != "" {
				return a.siteStatus(cmd.Context(), site, asJSON)
			}
			return a.status(cmd.Context(), asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the daemon's /v1/status body (with --site, that site's object)")
	a.siteFlag(cmd, &site, "show this site alone")
	return cmd
}

func (a *app) status(ctx context.Context, asJSON bool) (int, error) {
	socket, cfg := a.controlSocket()
	ctx, cancel := context.WithTimeout(ctxOrBackground(ctx), 10*time.Second)
	defer cancel()
	st, err := api.NewClient(socket).Status(ctx)
	if err != nil {
		return clientFailure(err)
	}
	if asJSON {
		return exitOK, writeJSON(a.stdout, st)
	}
	// Without a config that loads, the status shows every source's
	// signals and no thresholds.
	var th *state.Config
	shown := config.Default()
	if cfg != nil {
		shown = cfg
	}
	set := shown.ShownSignals()
	if cfg != nil {
		sc := cfg.StateConfig(set)
		th = &sc
	}
	st.WriteText(a.stdout, set, th, time.Now())
	return exitOK, nil
}

// siteStatus prints the status of the site named name
// (GET /v1/status?site=NAME).
func (a *app) siteStatus(ctx context.Context, name string, asJSON bool) (int, error) {
	socket, _ := a.controlSocket()
	ctx, cancel := context.WithTimeout(ctxOrBackground(ctx), 10*time.Second)
	defer cancel()
	site, err := api.NewClient(socket).SiteStatus(ctx, name)
	if err != nil {
		return clientFailure(err)
	}
	if asJSON {
		return exitOK, writeJSON(a.stdout, site)
	}
	site.WriteText(a.stdout, time.Now())
	return exitOK, nil
}

// writeJSON writes v indented, as the daemon answers it.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// siteFlag adds --site to cmd, into site; usage says what it does. Shells
// complete it with the names of the config's sites.
func (a *app) siteFlag(cmd *cobra.Command, site *string, usage string) {
	cmd.Flags().StringVar(site, "site", "", usage+" (`name` of the config's sites; gearshift sites lists them)")
	cmd.RegisterFlagCompletionFunc("site", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		cfg, err := a.loadConfigOffline()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, s := range cfg.SiteList(0) {
			names = append(names, s.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

// controlSocket returns the daemon's control socket path from the config,
// and the config when it loads. A config that does not load (edited and
// not yet reloaded, say) must not keep the operator from the daemon: the
// socket path is then read leniently from the file (or the default used),
// and the status shows no thresholds.
func (a *app) controlSocket() (string, *config.Config) {
	cfg, invalid := a.daemonConfig()
	if invalid != nil {
		return cfg.Control.Socket, nil
	}
	return cfg.Control.Socket, cfg
}

// clientFailure turns a control client error into an exit code and one
// sentence naming what to do.
func clientFailure(err error) (int, error) {
	if errors.Is(err, api.ErrUnreachable) && errors.Is(err, os.ErrPermission) {
		return exitFailure, fmt.Errorf("%v (run as root, or as a member of the config's control.group)", err)
	}
	if errors.Is(err, api.ErrNoAnswer) {
		return exitFailure, fmt.Errorf("%v: the daemon is running but busy (a Varnish target slow to load a profile?); see `gearshift logs`", err)
	}
	if errors.Is(err, api.ErrUnreachable) {
		return exitFailure, fmt.Errorf("%v (is the daemon running? start it with `gearshift start` or `systemctl start gearshift`)", err)
	}
	var ae *api.APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusForbidden {
		// A refusal for want of permission is a runtime failure (2 is
		// for usage and config errors: docs/operating.md#commands).
		return exitFailure, fmt.Errorf("the daemon refused: %s", ae.Message)
	}
	if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
		// A site the daemon's config does not have (SPEC 15: exit 1);
		// the daemon's message names it.
		return exitFailure, errors.New(ae.Message)
	}
	if errors.As(err, &ae) && ae.StatusCode/100 == 4 {
		return exitUsage, fmt.Errorf("the daemon refused: %s", ae.Message)
	}
	return exitFailure, fmt.Errorf("the daemon failed: %w", err)
}

func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

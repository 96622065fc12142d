package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/offline/ban"
)

func newBanCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "ban EXPRESSION",
		Short: "Ban objects from the cache of every Varnish target (Varnish's ban syntax)",
		Long: `Send a ban to every Varnish target of the config at once and report
each one's answer. A fleet's config (or every node's) lists all the nodes'
admin ports: an HTTP PURGE reaches one node only. A ban is the server's:
it reaches every site.`,
		Example: `  gearshift ban 'req.url ~ ^/news/'
  gearshift --config /etc/gearshift/fleet.yaml ban 'obj.http.X-Gs-Host == example.com'`,
		Args: cobra.MinimumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) (int, error) {
			words, err := ban.Parse(strings.Join(args, " "))
			if err != nil {
				return exitUsage, err
			}
			return a.ban(cmd.Context(), func(*config.Config) ([]string, int, error) { return words, exitOK, nil })
		}),
	}
}

func newPurgeCmd(a *app) *cobra.Command {
	var tags []string
	var site string
	cmd := &cobra.Command{
		Use:   "purge URL | --tag TAG...",
		Short: "Remove a URL (every variant of it), or every page with a tag, from the cache of every Varnish target",
		Long: `Remove a URL from the cache of every Varnish target, every variant of it
(both schemes, every session's copy). With --tag, remove every page the
backend tagged with TAG in its xkey or Surrogate-Key response header, on
every host; --tag may be given more than once. With --site, a tag purge
reaches the pages of that site's hosts alone, and a URL must be one of
that site's (else it is a usage error).`,
		Example: `  gearshift purge https://example.com/news/today
  gearshift purge --tag product-42 --tag category-7
  gearshift purge --tag product-42 --site shop   # the shop's pages alone`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(tags) > 0 && len(args) > 0:
				return fmt.Errorf("purge takes a URL or --tag, not both: got %q and --tag", args[0])
			case len(tags) == 0 && len(args) != 1:
				return fmt.Errorf("purge takes one URL (http://host/path) or --tag TAG, got %d arguments", len(args))
			}
			return nil
		},
		RunE: runE(func(cmd *cobra.Command, args []string) (int, error) {
			if len(tags) > 0 {
				words, err := ban.Tags(tags)
				if err != nil {
					return exitUsage, err
				}
				return a.ban(cmd.Context(), func(cfg *config.Config) ([]string, int, error) {
					return scopeToSite(cfg, site, words)
				})
			}
			return a.ban(cmd.Context(), func(cfg *config.Config) ([]string, int, error) {
				return purgeURL(cfg, site, args[0])
			})
		}),
	}
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "remove every page with this tag (xkey or Surrogate-Key header); repeatable")
	a.siteFlag(cmd, &site, "purge this site's pages alone; without it, every site's")
	return cmd
}

// ban sends the ban that words makes of the config to every target: exit
// 0 when all took it, 1 when any did not. words returns the exit code of
// its error.
func (a *app) ban(ctx context.Context, words func(*config.Config) ([]string, int, error)) (int, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return exitUsage, err
	}
	w, code, err := words(cfg)
	if err != nil {
		return code, err
	}
	ctx, cancel := context.WithTimeout(ctxOrBackground(ctx), 30*time.Second)
	defer cancel()
	failed := 0
	results := ban.Send(ctx, cfg, w)
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintf(a.stdout, "%s: REFUSED: %v\n", r.Target, r.Err)
			continue
		}
		fmt.Fprintf(a.stdout, "%s: banned\n", r.Target)
	}
	if failed > 0 {
		return exitFailure, fmt.Errorf("%d of %d Varnish targets did not take the ban", failed, len(results))
	}
	return exitOK, nil
}

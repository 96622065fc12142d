package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/offline/profilecheck"
	"github.com/gearshift/gearshift/profiles"
)

func newProfilesCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: "List, print, compile-check or export the three gears' VCL programs",
		Long: `Each gear is one VCL program, rendered from gearshift's templates with the
config's values, or read verbatim from profiles.<gear>.vcl_file. gearshift
loads all three into Varnish under content-addressed names
(gearshift-<gear>-<8 hex of sha256>) and switches between them with vcl.use.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var use, siteVCL string
	export := &cobra.Command{
		Use:   "export DIR",
		Short: "Write each gear's VCL file and a varnishd -I command file into DIR",
		Long: `Write ` + strings.ReplaceAll(state.OneOf("and"), ",", ".vcl,") + `.vcl
into DIR (a file per gear, named after it), and gearshift.cli: the varnishd
commands that load them under their gearshift names and make one of them
active. Add "-I DIR/gearshift.cli" to varnishd's command line (see
docs/gears.md) and a restarted Varnish boots straight into gearshift's profiles,
before gearshift reconnects.

With varnish.mode: label, gearshift.cli instead points the label gearshift at
one of them and then loads the site's own VCL (--site-vcl) and makes it
active: start varnishd with -f '' -I DIR/gearshift.cli, since a VCL that
hands requests to vcl(gearshift) compiles only once the label exists.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(_ *cobra.Command, args []string) (int, error) {
			return a.profilesExport(args[0], use, siteVCL)
		}),
	}
	export.Flags().StringVar(&use, "use", state.Lightest.String(), "the gear varnishd starts in: "+state.OneOf("or"))
	export.Flags().StringVar(&siteVCL, "site-vcl", profiles.SiteVCL, "label mode: the site's own VCL, loaded after the label and made active")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the gears with their VCL names and where each comes from",
		Args:  cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) (int, error) {
			return a.profilesList()
		}),
	}, &cobra.Command{
		Use:       "show " + state.OneOf("|"),
		Short:     "Print a gear's VCL, ready for vcl.load",
		Args:      cobra.ExactArgs(1),
		ValidArgs: state.Names(),
		RunE: runE(func(_ *cobra.Command, args []string) (int, error) {
			return a.profilesShow(args[0])
		}),
	}, &cobra.Command{
		Use:   "check",
		Short: "Compile the three gears in each configured Varnish, under temporary names, then discard them",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return a.profilesCheck(ctxOrBackground(cmd.Context()))
		}),
	}, export)
	return cmd
}

// buildProfiles loads the config and builds the set; any failure is a
// config error. Offline (list, show, export) does not need this machine's
// admin secrets.
func (a *app) buildProfiles(offline bool) (*config.Config, profiles.Set, error) {
	load := a.loadConfig
	if offline {
		load = a.loadConfigOffline
	}
	cfg, err := load()
	if err != nil {
		return nil, profiles.Set{}, err
	}
	// The running daemon makes its guest secret at its start and keeps
	// it: what is printed, exported or compiled here stands in for it.
	cfg.GuestSecret = profiles.RedactedGuestSecret
	set, err := profiles.Build(cfg.Site())
	if err != nil {
		return nil, profiles.Set{}, err
	}
	return cfg, set, nil
}

func (a *app) profilesList() (int, error) {
	_, set, err := a.buildProfiles(true)
	if err != nil {
		return exitUsage, err
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GEAR\tNAME\tSOURCE")
	for _, p := range set {
		fmt.Fprintf(w, "%s\t%s\t%s\n", p.Gear, p.Name, p.Source)
	}
	return exitOK, w.Flush()
}

func (a *app) profilesShow(gear string) (int, error) {
	s, err := state.Parse(gear)
	if err != nil {
		return exitUsage, err
	}
	_, set, err := a.buildProfiles(true)
	if err != nil {
		return exitUsage, err
	}
	_, err = fmt.Fprint(a.stdout, set[s].VCL)
	return exitOK, err
}

func (a *app) profilesExport(dir, use, siteVCL string) (int, error) {
	s, err := state.Parse(use)
	if err != nil {
		return exitUsage, fmt.Errorf("--use: %w", err)
	}
	cfg, set, err := a.buildProfiles(true)
	if err != nil {
		return exitUsage, err
	}
	label := cfg.Varnish.Mode == config.ModeLabel
	sites, err := controller.SitesExport(cfg, set)
	if err != nil {
		return exitUsage, err
	}
	var paths []string
	switch {
	case sites != nil && label:
		paths, err = profiles.ExportSites(*sites, dir, s, siteVCL)
	case sites != nil:
		paths, err = profiles.ExportSites(*sites, dir, s, "")
	case label:
		paths, err = profiles.ExportLabel(set, dir, s, siteVCL)
	default:
		paths, err = profiles.Export(set, dir, s)
	}
	if err != nil {
		return exitFailure, err
	}
	for _, p := range paths {
		fmt.Fprintf(a.stdout, "wrote %s\n", p)
	}
	cli := paths[len(paths)-1]
	if label && sites != nil {
		fmt.Fprintf(a.stdout, "include %s in %s and call gearshift_recv from its vcl_recv (the file says how); ", filepath.Join(dir, profiles.SitesSnippetFile), siteVCL)
	}
	if label {
		fmt.Fprintf(a.stdout, "in varnishd's command line, replace \"-f %s\" with \"-f '' -I %s\": it labels gearshift's %s gear, then loads and uses %s\n", siteVCL, cli, s, siteVCL)
	} else {
		what := "gearshift's " + s.String() + " gear"
		if sites != nil {
			what = "gearshift's router with every site in the " + s.String() + " gear"
		}
		fmt.Fprintf(a.stdout, "add \"-I %s\" to varnishd's command line to boot into %s\n", cli, what)
	}
	return exitOK, nil
}

// profilesCheck compiles every gear in every target under a temporary name
// and discards it at once, so nothing changes in Varnish. A profile that
// does not compile prints the compiler's message.
func (a *app) profilesCheck(ctx context.Context) (int, error) {
	cfg, set, err := a.buildProfiles(false)
	if err != nil {
		return exitUsage, err
	}
	failed, total := 0, 0
	err = profilecheck.Run(ctx, cfg, set, func(r profilecheck.Result) {
		total++
		p := r.Profile
		if r.Err == nil && r.Plain {
			fmt.Fprintf(a.stdout, "%-8s %s on %s: OK without varnish-modules (xkey, vsthrottle are missing there: "+
				"a session's pages are dropped with bans, no client budget; apt install varnish-modules)\n", p.Gear, p.Name, r.Target)
			return
		}
		if r.Err == nil {
			fmt.Fprintf(a.stdout, "%-8s %s on %s: OK\n", p.Gear, p.Name, r.Target)
			return
		}
		failed++
		fmt.Fprintf(a.stdout, "%-8s %s on %s: FAILED (source: %s)\n", p.Gear, p.Name, r.Target, p.Source)
		var ce *varnishadm.CLIError
		if errors.As(r.Err, &ce) {
			fmt.Fprintf(a.stderr, "%s\n", strings.TrimRight(ce.Text, "\n"))
		} else {
			fmt.Fprintf(a.stderr, "%v\n", r.Err)
		}
	})
	if err != nil {
		return exitUsage, err
	}
	if failed > 0 {
		return exitFailure, fmt.Errorf("%d of %d profile checks failed: fix the VCL or the config and run `gearshift profiles check` again", failed, total)
	}
	return exitOK, nil
}

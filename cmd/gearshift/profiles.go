package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
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
active. Add "-I DIR/gearshift.cli" to varnishd's command line (see the
README) and a restarted Varnish boots straight into gearshift's profiles,
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
	export.Flags().StringVar(&use, "use", "light", "the gear varnishd starts in: "+state.OneOf("or"))
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
func (a *app) buildProfiles(offline bool) (*profiles.Config, profiles.Set, error) {
	load := a.loadConfig
	if offline {
		load = a.loadConfigOffline
	}
	cfg, err := load()
	if err != nil {
		return nil, profiles.Set{}, err
	}
	set, err := profiles.Build(cfg)
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
		fmt.Fprintf(w, "%s\t%s\t%s\n", p.State, p.Name, p.Source)
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
	label := cfg.Varnish.Mode == profiles.ModeLabel
	var paths []string
	if label {
		paths, err = profiles.ExportLabel(set, dir, s, siteVCL)
	} else {
		paths, err = profiles.Export(set, dir, s)
	}
	if err != nil {
		return exitFailure, err
	}
	for _, p := range paths {
		fmt.Fprintf(a.stdout, "wrote %s\n", p)
	}
	cli := paths[len(paths)-1]
	if label {
		fmt.Fprintf(a.stdout, "in varnishd's command line, replace \"-f %s\" with \"-f '' -I %s\": it labels gearshift's %s gear, then loads and uses %s\n", siteVCL, cli, s, siteVCL)
	} else {
		fmt.Fprintf(a.stdout, "add \"-I %s\" to varnishd's command line to boot into gearshift's %s gear\n", cli, s)
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
	if len(cfg.Varnish.Targets) == 0 {
		return exitUsage, errors.New("varnish.targets: no Varnish to check the profiles against")
	}
	failed, total := 0, 0
	for _, t := range cfg.Varnish.Targets {
		c, err := varnishadm.NewFromFile(t.Admin, t.SecretFile)
		if err != nil {
			return exitUsage, fmt.Errorf("varnish target %s: %w", t.Admin, err)
		}
		if d := time.Duration(cfg.Varnish.Timeout); d > 0 {
			c.Timeout = d
			if c.LoadTimeout < d {
				c.LoadTimeout = d
			}
		}
		for _, p := range set {
			total++
			if err := checkProfile(ctx, c, p); err != nil {
				failed++
				fmt.Fprintf(a.stdout, "%-8s %s on %s: FAILED (source: %s)\n", p.State, p.Name, t.Admin, p.Source)
				var ce *varnishadm.CLIError
				if errors.As(err, &ce) {
					fmt.Fprintf(a.stderr, "%s\n", strings.TrimRight(ce.Text, "\n"))
				} else {
					fmt.Fprintf(a.stderr, "%v\n", err)
				}
				continue
			}
			fmt.Fprintf(a.stdout, "%-8s %s on %s: OK\n", p.State, p.Name, t.Admin)
		}
		c.Close()
	}
	if failed > 0 {
		return exitFailure, fmt.Errorf("%d of %d profile checks failed: fix the VCL or the config and run `gearshift profiles check` again", failed, total)
	}
	return exitOK, nil
}

// checkProfile loads p under a temporary name and discards it.
func checkProfile(ctx context.Context, c *varnishadm.Client, p profiles.Profile) error {
	raw := make([]byte, 4)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	// Cold: compiled and loaded, but no backend or probe is started.
	name := profiles.NamePrefix + "check-" + p.State.String() + "-" + hex.EncodeToString(raw)
	if err := c.VCLInline(ctx, name, p.VCL, "cold"); err != nil {
		return err
	}
	if err := c.VCLDiscard(ctx, name); err != nil {
		return fmt.Errorf("%s compiled, but discarding it failed (discard it with `varnishadm vcl.discard %s`): %w", name, name, err)
	}
	return nil
}

package profiles

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
)

// CLIFile is the name of the varnishd -I command file Export writes.
const CLIFile = "gearshift.cli"

// Export writes the three profiles into dir as <state>.vcl, plus CLIFile:
// varnishd commands that load them under their gearshift names and make
// active's profile the active VCL. Started with -I dir/gearshift.cli,
// varnishd boots straight into gearshift's profiles, and gearshift finds
// them already loaded when it connects. Every command is marked so that its
// failure does not abort varnishd's start (a profile file deleted or
// broken): Varnish then boots into its -f VCL and gearshift loads the
// profiles when it connects. It returns the paths written.
func Export(set Set, dir string, active state.Gear) ([]string, error) {
	return export(set, dir, active, func(cli *strings.Builder, _ string) ([]string, error) {
		fmt.Fprintf(cli, "-vcl.use %s\n", set[active].Name)
		return nil, nil
	})
}

// SitesExport is what a config with sites boots into: the profiles of
// each set of site overrides (the default site's first), each site's set,
// and the router.
type SitesExport struct {
	Sets   []*Set
	Sites  []string // the sites' names
	SetOf  []int    // each site's set, an index in Sets
	Router Profile
	Routes []Route // for label mode's snippet
}

// SitesSnippetFile is the label mode's snippet ExportSites writes beside
// the profiles: the site's own VCL includes it and calls gearshift_recv.
const SitesSnippetFile = "gearshift-sites.vcl"

// ExportSites is Export for a config with sites: CLIFile loads every set's
// profiles (the first set's as <state>.vcl, the others' as
// <state>-<set>.vcl), points each site's label at its set's profile of
// active, then loads the router (router.vcl) and makes it active. As with
// Export, a command that fails does not abort varnishd's start: it boots
// into its -f VCL, and gearshift loads the rest when it connects.
//
// With siteVCL (label mode) it writes SitesSnippetFile instead of the
// router, and CLIFile ends as ExportLabel's does: the site's VCL, which
// includes the snippet, loaded and made active; a failed label or site
// VCL stops varnishd, as a broken -f VCL would.
func ExportSites(x SitesExport, dir string, active state.Gear, siteVCL string) ([]string, error) {
	if len(x.Sets) == 0 || len(x.Sites) != len(x.SetOf) {
		return nil, fmt.Errorf("export profiles: %d sets for %d sites (%d with a set)", len(x.Sets), len(x.Sites), len(x.SetOf))
	}
	return export(*x.Sets[0], dir, active, func(cli *strings.Builder, dir string) ([]string, error) {
		var written []string
		for i, set := range x.Sets[1:] {
			for _, p := range set {
				path, err := writeProfile(cli, filepath.Join(dir, fmt.Sprintf("%s-%d.vcl", p.Gear, i+1)), p)
				if err != nil {
					return written, err
				}
				written = append(written, path)
			}
		}
		mark := "-"
		if siteVCL != "" {
			mark = ""
		}
		for i, site := range x.Sites {
			if x.SetOf[i] < 0 || x.SetOf[i] >= len(x.Sets) {
				return written, fmt.Errorf("site %s: no set %d", site, x.SetOf[i])
			}
			fmt.Fprintf(cli, "%svcl.label %s %s\n", mark, SiteLabel(site), x.Sets[x.SetOf[i]][active].Name)
		}
		if siteVCL != "" {
			path := filepath.Join(dir, SitesSnippetFile)
			snippet, err := SitesSnippet(x.Routes, path)
			if err != nil {
				return written, err
			}
			if err := writeFileAtomic(path, []byte(snippet)); err != nil {
				return written, err
			}
			site, err := filepath.Abs(siteVCL)
			if err != nil {
				return written, err
			}
			quoted, err := varnishadm.Quote(site)
			if err != nil {
				return written, err
			}
			fmt.Fprintf(cli, "vcl.load boot %s\nvcl.use boot\n", quoted)
			return append(written, path), nil
		}
		path, err := writeProfile(cli, filepath.Join(dir, "router.vcl"), x.Router)
		if err != nil {
			return written, err
		}
		fmt.Fprintf(cli, "-vcl.use %s\n", x.Router.Name)
		return append(written, path), nil
	})
}

// writeProfile writes p to path and the command that loads it to cli.
func writeProfile(cli *strings.Builder, path string, p Profile) (string, error) {
	if p.Name == "" || p.VCL == "" {
		return "", fmt.Errorf("the %s profile is empty", p.Name)
	}
	quoted, err := varnishadm.Quote(path) // -I files are read by the same CLI parser as the admin port
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, []byte(p.VCL)); err != nil {
		return "", fmt.Errorf("export profile %s: %w", p.Name, err)
	}
	fmt.Fprintf(cli, "-vcl.load %s %s warm\n", p.Name, quoted)
	return path, nil
}

// SiteVCL is the site's own VCL on a stock Debian/Ubuntu Varnish.
const SiteVCL = "/etc/varnish/default.vcl"

// ExportLabel is Export for label mode: CLIFile loads the three profiles,
// points the label Label at active's, then loads the site's own VCL from
// siteVCL under the name "boot" and makes it active. varnishd compiles its
// -f VCL before it runs -I, and a VCL that hands requests to
// vcl(gearshift) does not compile before the label exists, so varnishd is
// started with -f ” and this file does what -f did. A failed profile load
// is skipped; a failed label or site VCL stops varnishd, as a broken -f
// VCL would (the site's VCL cannot run without the label).
func ExportLabel(set Set, dir string, active state.Gear, siteVCL string) ([]string, error) {
	return export(set, dir, active, func(cli *strings.Builder, _ string) ([]string, error) {
		site, err := filepath.Abs(siteVCL)
		if err != nil {
			return nil, err
		}
		quoted, err := varnishadm.Quote(site)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cli, "vcl.label %s %s\n", Label, set[active].Name)
		fmt.Fprintf(cli, "vcl.load boot %s\n", quoted)
		fmt.Fprintf(cli, "vcl.use boot\n")
		return nil, nil
	})
}

func export(set Set, dir string, active state.Gear, finish func(cli *strings.Builder, dir string) ([]string, error)) ([]string, error) {
	if !active.Valid() {
		return nil, fmt.Errorf("export profiles: unknown state %d", int(active))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("export profiles: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("export profiles: %w", err)
	}
	var cli strings.Builder
	var written []string
	for _, p := range set {
		if p.Name == "" || p.VCL == "" {
			return nil, fmt.Errorf("export profiles: the %s profile is empty", p.Gear)
		}
		path, err := writeProfile(&cli, filepath.Join(dir, p.Gear.String()+".vcl"), p)
		if err != nil {
			return nil, fmt.Errorf("export profiles to %s: %w", dir, err)
		}
		written = append(written, path)
	}
	more, err := finish(&cli, dir)
	if err != nil {
		return nil, fmt.Errorf("export profiles to %s: %w", dir, err)
	}
	written = append(written, more...)
	path := filepath.Join(dir, CLIFile)
	if err := writeFileAtomic(path, []byte(cli.String())); err != nil {
		return nil, fmt.Errorf("export profiles: %w", err)
	}
	return append(written, path), nil
}

// writeFileAtomic replaces path with data so that a reader (varnishd
// starting) never sees half a file. The file is world-readable: Varnish's
// VCL compiler runs as an unprivileged user.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

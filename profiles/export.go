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
	return export(set, dir, active, func(cli *strings.Builder) error {
		fmt.Fprintf(cli, "-vcl.use %s\n", set[active].Name)
		return nil
	})
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
	return export(set, dir, active, func(cli *strings.Builder) error {
		site, err := filepath.Abs(siteVCL)
		if err != nil {
			return err
		}
		quoted, err := varnishadm.Quote(site)
		if err != nil {
			return err
		}
		fmt.Fprintf(cli, "vcl.label %s %s\n", Label, set[active].Name)
		fmt.Fprintf(cli, "vcl.load boot %s\n", quoted)
		fmt.Fprintf(cli, "vcl.use boot\n")
		return nil
	})
}

func export(set Set, dir string, active state.Gear, finish func(*strings.Builder) error) ([]string, error) {
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
		path := filepath.Join(dir, p.Gear.String()+".vcl")
		quoted, err := varnishadm.Quote(path) // -I files are read by the same CLI parser as the admin port
		if err != nil {
			return nil, fmt.Errorf("export profiles to %s: %w", dir, err)
		}
		if err := writeFileAtomic(path, []byte(p.VCL)); err != nil {
			return nil, fmt.Errorf("export profile %s: %w", p.Gear, err)
		}
		written = append(written, path)
		fmt.Fprintf(&cli, "-vcl.load %s %s warm\n", p.Name, quoted)
	}
	if err := finish(&cli); err != nil {
		return nil, fmt.Errorf("export profiles to %s: %w", dir, err)
	}
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

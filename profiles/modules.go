package profiles

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
)

// The built-in profiles import two vmods of Debian's varnish-modules:
// xkey, to drop a session's pages (and a site's tags) without a ban, and
// vsthrottle, for profiles.client_budget. Every profile has a Plain twin
// for a Varnish without them.

// ErrMissingModules is what loading a profile rendered with
// varnish-modules returns from a Varnish without them (see MissingModules).
var ErrMissingModules = errors.New("varnish-modules (xkey, vsthrottle) are missing in this Varnish")

// missingModuleRE matches the compiler's message for an import it cannot
// resolve: "Could not find VMOD xkey", "Could not load VMOD vsthrottle".
var missingModuleRE = regexp.MustCompile(`Could not (?:find|load) VMOD (?:xkey|vsthrottle)\b`)

// MissingModules tells whether err is a Varnish's refusal of a profile
// because xkey or vsthrottle cannot be imported there.
func MissingModules(err error) bool {
	return err != nil && (errors.Is(err, ErrMissingModules) || missingModuleRE.MatchString(err.Error()))
}

// Modules are the vmods the built-in profiles import beside std.
var Modules = []string{"xkey", "vsthrottle"}

// vmodDirs are where Varnish packages put their vmods.
var vmodDirs = []string{
	"/usr/lib/x86_64-linux-gnu/varnish/vmods", "/usr/lib/aarch64-linux-gnu/varnish/vmods",
	"/usr/lib/varnish/vmods", "/usr/lib64/varnish/vmods", "/usr/local/lib/varnish/vmods",
}

// MissingModulesHere looks for the vmods of Modules beside this host's
// std vmod: dir is where std is ("" when no Varnish is installed here,
// and nothing can be told), missing those of Modules not there.
func MissingModulesHere() (dir string, missing []string) {
	for _, d := range vmodDirs {
		if _, err := os.Stat(filepath.Join(d, "libvmod_std.so")); err != nil {
			continue
		}
		for _, m := range Modules {
			if _, err := os.Stat(filepath.Join(d, "libvmod_"+m+".so")); err != nil {
				missing = append(missing, m)
			}
		}
		return d, missing
	}
	return "", nil
}

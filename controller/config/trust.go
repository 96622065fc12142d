package config

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gearshift/gearshift/profiles"
)

// CheckTrusted refuses a file that someone other than root and the daemon's
// own user could change: the file, or a directory above it, owned by
// another user, or writable by others (a directory with the sticky bit,
// /tmp, is fine). Both the directories above path as given and those above
// the file it resolves to are judged: whoever can write the directory of a
// symbolic link can point it elsewhere. Whoever can write the config, a
// VCL file or a hook controls a root daemon: its backends, its VCL, the
// paths root writes, the programs root runs. sshd's StrictModes is the
// model.
func CheckTrusted(path string) error {
	abs, resolved, err := trustPaths(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return fmt.Errorf("cannot stat %s: %v", resolved, unwrapPathError(err))
	}
	if err := checkTrustedInfo(resolved, resolved, fi); err != nil {
		return err
	}
	return checkTrustedDirs(abs, resolved)
}

// CheckTrustedDir judges a directory the daemon writes its own files in
// (history.dir, the directories of pid_file and log.file) by CheckTrusted's
// rules: the directory and every one above it, along the path as given and
// the one it resolves to. Whoever can write such a directory can replace
// the daemon's pid file (and have stop or logrotate signal a process of
// their choosing), plant links, or fill and rewrite its history. A
// directory that does not exist yet is judged by the nearest one above it
// that does: the daemon creates the rest, root's and not writable by
// others.
func CheckTrustedDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for {
		if _, err := os.Lstat(abs); err == nil || !errors.Is(err, os.ErrNotExist) || abs == filepath.Dir(abs) {
			break
		}
		abs = filepath.Dir(abs)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("resolve %s: %v", abs, unwrapPathError(err))
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return fmt.Errorf("cannot stat %s: %v", resolved, unwrapPathError(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", abs)
	}
	if err := checkTrustedInfo("the directory "+resolved, resolved, fi); err != nil {
		return err
	}
	return checkTrustedDirs(abs, resolved)
}

// trustPaths returns path made absolute, and the file it resolves to.
func trustPaths(path string) (abs, resolved string, err error) {
	abs, err = filepath.Abs(path)
	if err != nil {
		return "", "", err
	}
	resolved, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %v", path, unwrapPathError(err))
	}
	return abs, resolved, nil
}

// checkTrustedDirs judges every directory above the two paths of a file.
func checkTrustedDirs(abs, resolved string) error {
	seen := map[string]bool{}
	for _, start := range []string{abs, resolved} {
		for p := filepath.Dir(start); !seen[p]; p = filepath.Dir(p) {
			seen[p] = true
			fi, err := os.Stat(p)
			if err != nil {
				return fmt.Errorf("cannot stat %s: %v", p, unwrapPathError(err))
			}
			if err := checkTrustedInfo("a directory above it, "+p+",", p, fi); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTrustedInfo applies the rules of CheckTrusted to one file or
// directory: what names it in the message, p is its path.
func checkTrustedInfo(what, p string, fi os.FileInfo) error {
	mode := fi.Mode()
	if mode.Perm()&0o002 != 0 && !(mode.IsDir() && mode&os.ModeSticky != 0) {
		return fmt.Errorf("%s is writable by every user (mode %04o), so anyone could take over the daemon: chmod o-w %s", what, mode.Perm(), p)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && st.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("%s belongs to uid %d, who could take over the daemon: chown root %s", what, st.Uid, p)
	}
	return nil
}

// untrustedError is a config file that CheckTrusted's rules refuse.
type untrustedError struct{ error }

// readTrustedConfig opens the config once and judges the file it opened
// (not whatever the path names a moment later) and the directories above
// path and above the file it resolves to, then reads it. A file that is
// not a regular one (a device given by mistake) is read, bounded, to say
// what it is. Its refusals are untrustedError.
func readTrustedConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if !fi.Mode().IsRegular() {
		if _, err := readBounded(f, path); err != nil {
			return nil, err
		}
		return nil, untrustedError{fmt.Errorf("%s is not a regular file: give the YAML file to --config", path)}
	}
	abs, resolved, err := trustPaths(path)
	if err != nil {
		return nil, untrustedError{err}
	}
	// What the path resolves to is judged by the open file's own mode and
	// owner; the directories by their paths.
	if err := checkTrustedInfo(path, path, fi); err != nil {
		return nil, untrustedError{err}
	}
	if err := checkTrustedDirs(abs, resolved); err != nil {
		return nil, untrustedError{err}
	}
	return readBounded(f, path)
}

// dirOf is the directory of the file path, or "" for no file.
func dirOf(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Dir(path)
}

// readBounded reads f, refusing more than MaxConfigSize bytes.
func readBounded(f io.Reader, path string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if len(b) > MaxConfigSize {
		return nil, fmt.Errorf("config %s is larger than 1 MiB: not a gearshift config (give the YAML file to --config)", path)
	}
	return b, nil
}

// validateAll is Validate and the trust of the programs the config has
// the daemon run (see CheckTrusted): the on_change hook; and of the
// directories it writes its pid file and log in (see CheckTrustedDir).
// history.dir is not judged here: the flight recorder judges it before
// each file it opens and refuses to write there, and Warnings says so; a
// history it cannot keep never stops the daemon from shifting.
func (c *Config) validateAll() error {
	err := c.Validate()
	var extra []Problem
	for _, d := range []struct{ key, dir string }{
		{"pid_file", dirOf(c.PIDFile)},
		{"log.file", dirOf(c.Log.File)},
	} {
		if d.dir == "" || !filepath.IsAbs(d.dir) {
			continue // off, or Validate's to report
		}
		if terr := CheckTrustedDir(d.dir); terr != nil {
			extra = append(extra, Problem{Path: d.key, Msg: terr.Error(), Kind: Machine})
		}
	}
	if len(c.Hooks.OnChange) > 0 && hookCommandOK(c.Hooks.OnChange[0]) && strings.TrimSpace(c.Hooks.OnChange[0]) != "" {
		// A hook that cannot be found is Validate's to report.
		if p, lerr := exec.LookPath(c.Hooks.OnChange[0]); lerr == nil {
			if terr := CheckTrusted(p); terr != nil {
				extra = append(extra, Problem{Path: "hooks.on_change[0]", Msg: terr.Error(), Kind: Machine})
			}
		}
	}
	if len(extra) == 0 {
		return err
	}
	var ce *Error
	if err == nil {
		ce = &Error{}
	} else if !errors.As(err, &ce) {
		return err
	}
	ce.Problems = append(ce.Problems, extra...)
	return ce
}

// Warnings returns what is risky in a config that works: an admin secret
// that other users may read, credentials sent over plain http, a
// history.dir the daemon will not record in (CheckTrustedDir refuses it,
// or a file stands in its path), sites whose VCLs could pass Varnish's
// max_vcl. `config check` prints them, and the
// daemon logs them at start and at every reload; none stops it.
func (c *Config) Warnings() []Problem {
	var ws []Problem
	if c.History.Dir != "" && filepath.IsAbs(c.History.Dir) {
		if err := CheckTrustedDir(c.History.Dir); err != nil {
			ws = append(ws, Problem{
				Path: "history.dir",
				Msg:  err.Error() + ": the daemon runs and shifts, and records no history there (status says why in history_error)",
				Kind: Machine,
			})
		}
	}
	for i, t := range c.Varnish.Targets {
		if t.SecretFile == "" {
			continue
		}
		fi, err := os.Stat(t.SecretFile)
		if err != nil || !fi.Mode().IsRegular() {
			continue // Validate says why
		}
		if perm := fi.Mode().Perm(); perm&0o044 != 0 {
			ws = append(ws, Problem{
				Path: fmt.Sprintf("varnish.targets[%d].secret_file", i),
				Msg: fmt.Sprintf("%s can be read by its group or by every user (mode %04o), and the secret gives control of Varnish: chmod 0600 %s",
					t.SecretFile, perm, t.SecretFile),
				Kind: Machine,
			})
		}
	}
	ws = appendPurgeTokenWarning(ws, "profiles.purge_token_file", c.Profiles.PurgeTokenFile)
	for i, s := range c.Sites {
		ws = appendPurgeTokenWarning(ws, fmt.Sprintf("sites[%d].purge_token_file", i), s.PurgeTokenFile)
	}
	if w := c.maxVCLWarning(); w != nil {
		ws = append(ws, *w)
	}
	if dir, missing := profiles.MissingModulesHere(); len(missing) > 0 && c.usesBuiltinProfiles() {
		ws = append(ws, Problem{
			Path: "profiles",
			Msg: fmt.Sprintf("varnish-modules is not installed here (no %s in %s): the profiles drop a session's pages with bans, "+
				"which cost every later lookup, and keep no client budget%s (apt install varnish-modules)", strings.Join(missing, ", "), dir, c.reserveUnenforced()),
			Kind: Machine,
		})
	}
	p := c.Sensor.Prometheus
	if u, err := url.Parse(p.URL); err == nil && u.Scheme == "http" && (p.BasicAuthFile != "" || p.BearerTokenFile != "") {
		ws = append(ws, Problem{
			Path: "sensor.prometheus.url",
			Msg:  "credentials go to " + u.Redacted() + " over plain http, readable on the way: use https",
		})
	}
	return ws
}

// appendPurgeTokenWarning adds the warning of a purge token file f (at
// key) that every user may read.
func appendPurgeTokenWarning(ws []Problem, key, f string) []Problem {
	if f == "" {
		return ws
	}
	if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0 {
		ws = append(ws, Problem{
			Path: key,
			Msg:  fmt.Sprintf("%s can be read by every user (mode %04o), and the token lets anyone empty the cache: chmod o-r %s", f, fi.Mode().Perm(), f),
			Kind: Machine,
		})
	}
	return ws
}

// usesBuiltinProfiles tells whether any gear runs gearshift's own VCL
// (not a vcl_file), which imports varnish-modules.
func (c *Config) usesBuiltinProfiles() bool {
	for _, src := range c.Profiles.Sources() {
		if src.VCLFile == "" {
			return true
		}
	}
	return false
}

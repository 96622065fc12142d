package config

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// Limits of the settings that validation enforces.
const (
	MinPollInterval = 10 * time.Millisecond
	MaxPollInterval = time.Minute
	maxSocketPath   = 107 // sun_path holds 108 bytes, NUL included
)

// OnExitValues are the accepted values of on_exit.
var OnExitValues = append([]string{"keep"}, state.Names()...)

// LogLevels are the accepted values of log.level.
var LogLevels = []string{"debug", "info", "warn", "error"}

// Validate checks the whole config, including that the files it names (admin
// secrets, custom VCL files) are readable, the control group exists and so
// on. It returns an *Error listing every problem, or nil. The secret files
// are opened, never read into an error or a log.
func (c *Config) Validate() error {
	v := &validator{}
	c.validateSettings(v)
	c.validateFiles(v)
	return v.err()
}

// ValidateSettings is Validate without the checks that look at this machine
// (files, groups): for tools that use a config elsewhere than where it runs,
// such as replaying a trace.
func (c *Config) ValidateSettings() error {
	v := &validator{}
	c.validateSettings(v)
	return v.err()
}

type validator struct{ problems []Problem }

func (v *validator) add(path, format string, args ...any) {
	v.addKind(Setting, path, format, args...)
}

func (v *validator) addKind(k Kind, path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...), Kind: k})
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &Error{Problems: v.problems}
}

func (c *Config) validateSettings(v *validator) {
	poll := c.PollInterval
	if poll < timefmt.Duration(MinPollInterval) || poll > timefmt.Duration(MaxPollInterval) {
		v.add("poll_interval", "must be between %s and %s, got %s", timefmt.Duration(MinPollInterval), timefmt.Duration(MaxPollInterval), poll)
	}
	if fw := c.FastWindow; fw < 0 {
		v.add("fast_window", "must not be negative (0 turns the fast signal off), got %s", fw)
	} else if fw > 0 && fw < poll {
		v.add("fast_window", "must be 0 (off) or at least poll_interval (%s), got %s", poll, fw)
	}
	if c.CPUs < 0 {
		v.add("cpus", "must be 0 (detect) or a number of CPUs, got %d", c.CPUs)
	}

	if !contains(Modes, c.Varnish.Mode) {
		v.add("varnish.mode", "must be one of %s, got %q", strings.Join(Modes, ", "), c.Varnish.Mode)
	}
	if t := c.Varnish.Timeout; t <= 0 {
		v.add("varnish.timeout", "must be positive, got %s", t)
	}
	if len(c.Varnish.Targets) == 0 {
		v.add("varnish.targets", "at least one Varnish target is needed")
	} else if n := len(c.Varnish.Targets); n > MaxTargets {
		v.add("varnish.targets", "%d targets, more than the %d one gearshift drives", n, MaxTargets)
	}
	seen, names := map[string]int{}, map[string]int{}
	for i, t := range c.Varnish.Targets {
		p := fmt.Sprintf("varnish.targets[%d]", i)
		if err := checkHostPort(t.Admin); err != nil {
			v.add(p+".admin", "%v", err)
		} else if j, dup := seen[t.Admin]; dup {
			v.add(p+".admin", "%s is already varnish.targets[%d]", t.Admin, j)
		} else {
			seen[t.Admin] = i
		}
		if t.SecretFile == "" {
			v.add(p+".secret_file", "must name the admin secret file (varnishd -S)")
		}
		if t.Name != "" {
			if strings.ContainsAny(t.Name, "\x00\n") || strings.TrimSpace(t.Name) != t.Name {
				v.add(p+".name", "%q is not a varnishd -n name or directory", t.Name)
			} else if j, dup := names[t.Name]; dup {
				v.add(p+".name", "%s is already varnish.targets[%d].name: its traffic would count twice", t.Name, j)
			} else {
				names[t.Name] = i
			}
		}
	}

	if strings.TrimSpace(c.Backend.Host) == "" {
		v.add("backend.host", "must not be empty")
	} else if strings.ContainsAny(c.Backend.Host, " \t\r\n\"\\/:{}") && net.ParseIP(c.Backend.Host) == nil {
		v.add("backend.host", "%q is not a host name or IP address", c.Backend.Host)
	}
	if c.Backend.Port < 1 || c.Backend.Port > 65535 {
		v.add("backend.port", "must be between 1 and 65535, got %d", c.Backend.Port)
	}
	c.Backend.Check(v.add)
	c.validateReserve(v)

	c.validateBands(v)

	if c.Hysteresis.UpConfirm < 1 {
		v.add("hysteresis.up_confirm", "must be at least 1 sample, got %d", c.Hysteresis.UpConfirm)
	}
	if d := c.Hysteresis.DownWindow; d < 0 {
		v.add("hysteresis.down_window", "must not be negative, got %s", d)
	}
	if d := c.Hysteresis.MinDwell; d < 0 {
		v.add("hysteresis.min_dwell", "must not be negative, got %s", d)
	}
	if r := c.Hysteresis.DownTrafficRatio; r < 0 || r > 1 || math.IsNaN(r) {
		v.add("hysteresis.down_traffic_ratio", "must be between 0 (off) and 1, got %g", r)
	}
	sensor.Check(c.SensorConfig(), v.add)

	c.Profiles.Check(v.add)
	c.validateSites(v)

	if !contains(OnExitValues, c.OnExit) {
		v.add("on_exit", "must be one of %s, got %q", strings.Join(OnExitValues, ", "), c.OnExit)
	}
	c.Hooks.validate(v)
	checkPath(v, "control.socket", c.Control.Socket)
	if len(c.Control.Socket) > maxSocketPath {
		v.add("control.socket", "is %d bytes long; a unix socket path must be at most %d", len(c.Control.Socket), maxSocketPath)
	}
	if c.Log.File != "" && !filepath.IsAbs(c.Log.File) {
		v.add("log.file", "must be an absolute path, got %q", c.Log.File)
	}
	if !contains(LogLevels, c.Log.Level) {
		v.add("log.level", "must be one of %s, got %q", strings.Join(LogLevels, ", "), c.Log.Level)
	}
	checkPath(v, "pid_file", c.PIDFile)
	c.History.validate(v)
	if c.MetricsListen != "" {
		if err := checkHostPort(c.MetricsListen); err != nil {
			v.add("metrics_listen", "%v (or \"\" for no metrics)", err)
		}
	}
}

func (h *Hooks) validate(v *validator) {
	if len(h.OnChange) > 0 {
		switch cmd := h.OnChange[0]; {
		case strings.TrimSpace(cmd) == "":
			v.add("hooks.on_change[0]", "must name the command to run (the list is the command and its arguments, run without a shell)")
		case !hookCommandOK(cmd):
			v.add("hooks.on_change[0]", "must be an absolute path or a command name found in PATH, got %q", cmd)
		}
	}
	if h.Timeout <= 0 {
		v.add("hooks.timeout", "must be positive, got %s", h.Timeout)
	}
}

// hookCommandOK tells whether a hook command is named so that it does not
// depend on the daemon's working directory.
func hookCommandOK(cmd string) bool { return filepath.IsAbs(cmd) || !strings.Contains(cmd, "/") }

func (c *Config) validateFiles(v *validator) {
	site := c.Site()
	files := sensor.Files(c.SensorConfig())
	for _, key := range slices.Sorted(maps.Keys(files)) {
		if err := checkReadable(files[key]); err != nil {
			v.addKind(Machine, key, "%v", err)
		}
	}
	for i, t := range c.Varnish.Targets {
		if t.SecretFile == "" {
			continue
		}
		if err := checkReadable(t.SecretFile); err != nil {
			v.addKind(Machine, fmt.Sprintf("varnish.targets[%d].secret_file", i), "%v", err)
		}
	}
	if f := c.Profiles.PurgeTokenFile; f != "" {
		if _, err := profiles.ReadPurgeToken(f); err != nil {
			v.addKind(Machine, "profiles.purge_token_file", "%v", err)
		}
	}
	c.validateSiteFiles(v)
	for st, src := range c.Profiles.Sources() {
		if src.VCLFile == "" {
			continue
		}
		key := "profiles." + state.Gear(st).String() + ".vcl_file"
		if err := checkReadable(src.VCLFile); err != nil {
			v.addKind(Machine, key, "%v", err)
		} else if err := CheckTrusted(src.VCLFile); err != nil {
			v.addKind(Machine, key, "%v", err)
		} else if err := site.CheckVCLFile(src.VCLFile, nil); err != nil {
			v.addKind(Machine, key, "%v", err)
		}
	}
	if len(c.Hooks.OnChange) > 0 && strings.TrimSpace(c.Hooks.OnChange[0]) != "" && hookCommandOK(c.Hooks.OnChange[0]) {
		if _, err := exec.LookPath(c.Hooks.OnChange[0]); err != nil {
			v.addKind(Machine, "hooks.on_change[0]", "%v", hookCommandProblem(c.Hooks.OnChange[0], err))
		}
	}
	for _, kg := range [][2]string{{"control.group", c.Control.Group}, {"control.admin_group", c.Control.AdminGroup}} {
		key, g := kg[0], kg[1]
		if g == "" {
			continue
		}
		if _, err := user.LookupGroup(g); err != nil {
			v.addKind(Machine, key, "no group %q on this machine", g)
		}
	}
}

// hookCommandProblem words why exec.LookPath refused the hook command.
func hookCommandProblem(cmd string, err error) error {
	switch {
	case !filepath.IsAbs(cmd):
		return fmt.Errorf("%q not found in PATH (give its absolute path)", cmd)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s does not exist", cmd)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s is not executable (chmod +x)", cmd)
	}
	return fmt.Errorf("%s cannot be run: %v", cmd, unwrapPathError(err))
}

// checkReadable opens a regular file for reading; its contents are never
// looked at, so a secret cannot leak into the error.
func checkReadable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("%s does not exist", path)
		}
		if os.IsPermission(err) {
			return fmt.Errorf("%s is not readable by this user", path)
		}
		return fmt.Errorf("cannot open %s: %v", path, unwrapPathError(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cannot stat %s: %v", path, unwrapPathError(err))
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. 127.0.0.1:6082)", s)
	}
	if host == "" {
		return fmt.Errorf("%q has no host (e.g. 127.0.0.1:6082)", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be a number between 1 and 65535", s)
	}
	return nil
}

func checkPath(v *validator, key, p string) {
	if p == "" {
		v.add(key, "must not be empty")
	} else if !filepath.IsAbs(p) {
		v.add(key, "must be an absolute path, got %q", p)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (h History) validate(v *validator) {
	if h.Dir == "" {
		return
	}
	if !filepath.IsAbs(h.Dir) {
		v.add("history.dir", "must be an absolute path, got %q (or \"\" for no recording)", h.Dir)
	}
	if h.Keep < timefmt.Duration(24*time.Hour) {
		v.add("history.keep", "must be at least 1d, got %s", h.Keep)
	}
	if h.MaxBytes < 1_000_000 {
		v.add("history.max_bytes", "must be at least 1MB, got %s", h.MaxBytes)
	}
}

// ReachTimeout bounds Reach: every source is asked at once, and each
// bounds its own read (sensor.phpfpm.timeout, at most 10s) within it.
const ReachTimeout = 15 * time.Second

// Reach reads once each configured source that can tell more by a read
// than by its settings (see sensor.Reach): problems are faults of the
// config (a status page that is not php-fpm's, a pool of another name, a
// socket the user may not connect to), absent are sources not answering
// now, which the daemon rides out as unavailable. `config check` asks it;
// loading a config does not, so that the daemon starts before php-fpm.
func (c *Config) Reach(ctx context.Context) (problems, absent []Problem) {
	collect := func(to *[]Problem) func(key, format string, args ...any) {
		return func(key, format string, args ...any) {
			*to = append(*to, Problem{Path: key, Msg: fmt.Sprintf(format, args...), Kind: Machine})
		}
	}
	sensor.Reach(ctx, c.SensorConfig(), collect(&problems), collect(&absent))
	return problems, absent
}

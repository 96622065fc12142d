package profiles

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// Limits of the settings that validation enforces.
const (
	MinPollInterval = 10 * time.Millisecond
	MaxPollInterval = time.Minute
	maxSocketPath   = 107 // sun_path holds 108 bytes, NUL included
)

// OnExitValues are the accepted values of on_exit.
var OnExitValues = []string{"keep", "light", "moderate", "heavy"}

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
	v.problems = append(v.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &Error{Problems: v.problems}
}

func (c *Config) validateSettings(v *validator) {
	poll := c.PollInterval
	if poll < Duration(MinPollInterval) || poll > Duration(MaxPollInterval) {
		v.add("poll_interval", "must be between %s and %s, got %s", Duration(MinPollInterval), Duration(MaxPollInterval), poll)
	}
	if fw := c.FastWindow; fw < 0 {
		v.add("fast_window", "must not be negative (0 turns the fast signal off), got %s", fw)
	} else if fw > 0 && fw < poll {
		v.add("fast_window", "must be 0 (off) or at least poll_interval (%s), got %s", poll, fw)
	}
	if c.CPUs < 0 {
		v.add("cpus", "must be 0 (detect) or a number of CPUs, got %d", c.CPUs)
	}

	if t := c.Varnish.Timeout; t <= 0 {
		v.add("varnish.timeout", "must be positive, got %s", t)
	}
	if len(c.Varnish.Targets) == 0 {
		v.add("varnish.targets", "at least one Varnish target is needed")
	}
	seen := map[string]int{}
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
	}

	if strings.TrimSpace(c.Backend.Host) == "" {
		v.add("backend.host", "must not be empty")
	} else if strings.ContainsAny(c.Backend.Host, " \t\"\\/:") && net.ParseIP(c.Backend.Host) == nil {
		v.add("backend.host", "%q is not a host name or IP address", c.Backend.Host)
	}
	if c.Backend.Port < 1 || c.Backend.Port > 65535 {
		v.add("backend.port", "must be between 1 and 65535, got %d", c.Backend.Port)
	}

	validateBand(v, "states.moderate", c.States.Moderate)
	validateBand(v, "states.heavy", c.States.Heavy)
	validateOrder(v, c.States.Moderate.Enter, c.States.Heavy.Enter)

	if c.Hysteresis.UpConfirm < 1 {
		v.add("hysteresis.up_confirm", "must be at least 1 sample, got %d", c.Hysteresis.UpConfirm)
	}
	if d := c.Hysteresis.DownWindow; d < 0 {
		v.add("hysteresis.down_window", "must not be negative, got %s", d)
	}
	if d := c.Hysteresis.MinDwell; d < 0 {
		v.add("hysteresis.min_dwell", "must not be negative, got %s", d)
	}

	c.Profiles.validate(v)

	if !contains(OnExitValues, c.OnExit) {
		v.add("on_exit", "must be one of %s, got %q", strings.Join(OnExitValues, ", "), c.OnExit)
	}
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
	if c.MetricsListen != "" {
		if err := checkHostPort(c.MetricsListen); err != nil {
			v.add("metrics_listen", "%v (or \"\" for no metrics)", err)
		}
	}
}

func (p *Profiles) validate(v *validator) {
	for _, d := range []struct {
		key  string
		val  Duration
		zero bool // 0 allowed
	}{
		{"static_ttl", p.StaticTTL, false},
		{"heavy_min_ttl", p.HeavyMinTTL, false},
		{"heavy_session_ttl", p.HeavySessionTTL, false},
		{"heavy_grace", p.HeavyGrace, true},
	} {
		switch {
		case d.val < 0 && d.zero:
			v.add("profiles."+d.key, "must not be negative, got %s", d.val)
		case d.val < 0 || (d.val == 0 && !d.zero):
			v.add("profiles."+d.key, "must be positive, got %s", d.val)
		}
	}
	for i, name := range p.SessionCookies {
		if _, err := CookieGlobRegex(name); err != nil {
			v.add(fmt.Sprintf("profiles.session_cookies[%d]", i), "%v", err)
		}
	}
	extRE := regexp.MustCompile(`^[A-Za-z0-9]+$`)
	for i, ext := range p.StaticExtensions {
		if !extRE.MatchString(ext) {
			v.add(fmt.Sprintf("profiles.static_extensions[%d]", i), "%q is not a file extension (letters and digits, no dot)", ext)
		}
	}
	for i, re := range p.NeverCache {
		key := fmt.Sprintf("profiles.never_cache[%d]", i)
		if re == "" {
			v.add(key, "an empty pattern would match every path")
			continue
		}
		if strings.Contains(re, `"}`) || strings.ContainsAny(re, "\r\n") {
			v.add(key, "%q cannot go into a VCL string (no newline, no \"})", re)
			continue
		}
		// Varnish's regexes are PCRE; Go's RE2 is the same language but for
		// lookarounds and the like, which are left to Varnish to judge.
		var se *syntax.Error
		if _, err := regexp.Compile(re); err != nil && !(errors.As(err, &se) && se.Code == syntax.ErrInvalidPerlOp) {
			v.add(key, "%q is not a valid regex: %s", re, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	for i, a := range p.PurgeACL {
		if _, err := netip.ParseAddr(a); err == nil {
			continue
		}
		if _, err := netip.ParsePrefix(a); err == nil {
			continue
		}
		v.add(fmt.Sprintf("profiles.purge_acl[%d]", i), "%q is not an IP address or CIDR (e.g. 10.0.0.0/8)", a)
	}
}

func validateBand(v *validator, path string, b state.Band) {
	validateRule(v, path+".enter", b.Enter)
	validateRule(v, path+".stay", b.Stay)
	// The stay rule is looser than the enter rule: the gap is the hysteresis.
	e, s := b.Enter, b.Stay
	if ok(e.LoadPerCPU) && ok(s.LoadPerCPU) && *s.LoadPerCPU > *e.LoadPerCPU {
		v.add(path+".stay.load_per_cpu", "must be <= %s.enter.load_per_cpu (%g): a stay rule is looser than its enter rule, got %g", path, *e.LoadPerCPU, *s.LoadPerCPU)
	}
	if ok(e.MemAvailablePct) && ok(s.MemAvailablePct) && *s.MemAvailablePct < *e.MemAvailablePct {
		v.add(path+".stay.mem_available_pct", "must be >= %s.enter.mem_available_pct (%g): a stay rule is looser than its enter rule, got %g", path, *e.MemAvailablePct, *s.MemAvailablePct)
	}
	if ok(e.PSICPU) && ok(s.PSICPU) && *s.PSICPU > *e.PSICPU {
		v.add(path+".stay.psi_cpu", "must be <= %s.enter.psi_cpu (%g): a stay rule is looser than its enter rule, got %g", path, *e.PSICPU, *s.PSICPU)
	}
	if ok(e.PSIMem) && ok(s.PSIMem) && *s.PSIMem > *e.PSIMem {
		v.add(path+".stay.psi_mem", "must be <= %s.enter.psi_mem (%g): a stay rule is looser than its enter rule, got %g", path, *e.PSIMem, *s.PSIMem)
	}
}

// ok tells whether a threshold is set and in range, so that it is worth
// comparing with others (an out-of-range one is reported once, by itself).
func ok(p *float64) bool { return p != nil && *p > 0 && *p <= 100 }

func validateRule(v *validator, path string, r state.Rule) {
	if r.LoadPerCPU != nil && !(*r.LoadPerCPU > 0) {
		v.add(path+".load_per_cpu", "must be > 0, got %g", *r.LoadPerCPU)
	}
	for _, c := range []struct {
		key string
		val *float64
	}{
		{"mem_available_pct", r.MemAvailablePct},
		{"psi_cpu", r.PSICPU},
		{"psi_mem", r.PSIMem},
	} {
		if c.val != nil && !(*c.val > 0 && *c.val <= 100) {
			v.add(path+"."+c.key, "must be a percentage above 0 and at most 100, got %g", *c.val)
		}
	}
}

// validateOrder checks that heavy is entered on worse vitals than moderate.
func validateOrder(v *validator, mod, heavy state.Rule) {
	const m, h = "states.moderate.enter.", "states.heavy.enter."
	if ok(mod.LoadPerCPU) && ok(heavy.LoadPerCPU) && !(*heavy.LoadPerCPU > *mod.LoadPerCPU) {
		v.add(h+"load_per_cpu", "must be > %sload_per_cpu (%g), got %g", m, *mod.LoadPerCPU, *heavy.LoadPerCPU)
	}
	if ok(mod.MemAvailablePct) && ok(heavy.MemAvailablePct) && !(*heavy.MemAvailablePct < *mod.MemAvailablePct) {
		v.add(h+"mem_available_pct", "must be < %smem_available_pct (%g), got %g", m, *mod.MemAvailablePct, *heavy.MemAvailablePct)
	}
	if ok(mod.PSICPU) && ok(heavy.PSICPU) && !(*heavy.PSICPU > *mod.PSICPU) {
		v.add(h+"psi_cpu", "must be > %spsi_cpu (%g), got %g", m, *mod.PSICPU, *heavy.PSICPU)
	}
	if ok(mod.PSIMem) && ok(heavy.PSIMem) && !(*heavy.PSIMem > *mod.PSIMem) {
		v.add(h+"psi_mem", "must be > %spsi_mem (%g), got %g", m, *mod.PSIMem, *heavy.PSIMem)
	}
}

func (c *Config) validateFiles(v *validator) {
	for i, t := range c.Varnish.Targets {
		if t.SecretFile == "" {
			continue
		}
		if err := checkReadable(t.SecretFile); err != nil {
			v.add(fmt.Sprintf("varnish.targets[%d].secret_file", i), "%v", err)
		}
	}
	for _, s := range []struct {
		key string
		src Source
	}{{"light", c.Profiles.Light}, {"moderate", c.Profiles.Moderate}, {"heavy", c.Profiles.Heavy}} {
		if s.src.VCLFile == "" {
			continue
		}
		if err := checkReadable(s.src.VCLFile); err != nil {
			v.add("profiles."+s.key+".vcl_file", "%v", err)
		} else if err := c.checkVCLFile(s.src.VCLFile, nil); err != nil {
			v.add("profiles."+s.key+".vcl_file", "%v", err)
		}
	}
	if c.Control.Group != "" {
		if _, err := user.LookupGroup(c.Control.Group); err != nil {
			v.add("control.group", "no group %q on this machine", c.Control.Group)
		}
	}
}

// checkVCLFile refuses a vcl_file that cannot be a VCL program: one of the
// targets' admin secrets (Varnish's compiler would quote it in its error,
// into logs and status), or a file without a VCL declaration. text is the
// file's content, or nil to read it here. The error never quotes the file.
func (c *Config) checkVCLFile(path string, text []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cannot stat %s: %v", path, unwrapPathError(err))
	}
	for i, t := range c.Varnish.Targets {
		if t.SecretFile == "" {
			continue
		}
		if si, err := os.Stat(t.SecretFile); err == nil && os.SameFile(fi, si) {
			return fmt.Errorf("%s is the admin secret of varnish.targets[%d], not a VCL program", path, i)
		}
	}
	if text == nil {
		if text, err = os.ReadFile(path); err != nil {
			return fmt.Errorf("cannot read %s: %v", path, unwrapPathError(err))
		}
	}
	if !hasVCLDeclaration(text) {
		return fmt.Errorf("%s is not a VCL program: it does not start with \"vcl 4.0;\" or \"vcl 4.1;\" (only comments may come first)", path)
	}
	return nil
}

var vclDeclaration = regexp.MustCompile(`^vcl[ \t\r\n]+4\.[01][ \t\r\n]*;`)

// hasVCLDeclaration tells whether text starts with a VCL 4.0 or 4.1
// declaration, after white space and comments (#, // and /* */).
func hasVCLDeclaration(text []byte) bool {
	s := string(text)
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "#") || strings.HasPrefix(s, "//"):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return false
			}
			s = s[end+1:]
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return false
			}
			s = s[2+end+2:]
		default:
			return vclDeclaration.MatchString(s)
		}
	}
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

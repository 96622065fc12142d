// Package health judges a running gearshift daemon the way monitoring
// systems want it (`gearshift check`): one line, perfdata, and
// monitoring-plugin exit codes (docs/operating.md#health-check-nagios-icinga-zabbix-cron).
package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// Monitoring-plugin exit codes.
const (
	OK       = 0
	Warning  = 1
	Critical = 2
	Unknown  = 3
)

var names = [...]string{"OK", "WARNING", "CRITICAL", "UNKNOWN"}

// Options are the flags of `gearshift check`.
type Options struct {
	Timeout    time.Duration
	MaxAge     time.Duration
	WarnStates []string
	WarnForced bool
	Restart    bool
	Quiet      bool
}

// StatusGetter is what check asks of the daemon.
type StatusGetter interface {
	Status(ctx context.Context) (*api.Status, error)
}

var _ StatusGetter = (*api.Client)(nil)

// Checker runs one health check. Its edges (the daemon, the clock, starting
// the daemon, systemd) are fields so that tests can replace them.
type Checker struct {
	Opts       Options
	Config     *config.Config // names the daemon's socket and pid file
	ConfigErr  error          // the config file does not validate; the daemon runs with what it loaded
	ConfigPath string         // where the config comes from
	Client     StatusGetter
	Now        func() time.Time
	Running    func() (pid int, err error)             // the daemon's pid from the pid file, 0 when none runs
	Start      func(ctx context.Context) error         // starts the daemon (--restart)
	Systemd    func(ctx context.Context) (bool, error) // whether systemd manages gearshift on this host
	LockPath   string
	StartWait  time.Duration // how long a started daemon gets to answer
	Margin     time.Duration // beyond --timeout, for the check's own work
}

// Validate checks the options, naming the flag at fault.
func (o Options) Validate() error {
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	}
	if o.MaxAge <= 0 {
		return fmt.Errorf("--max-age must be positive, got %s", o.MaxAge)
	}
	for _, s := range o.WarnStates {
		if _, err := state.Parse(s); err != nil {
			return fmt.Errorf("--warn-state: %v", err)
		}
	}
	return nil
}

// Run performs the check, prints its line (unless quiet and OK) and returns
// the exit code. Past its own deadline it answers UNKNOWN, whatever hangs.
func (c *Checker) Run(ctx context.Context, w io.Writer) int {
	budget := c.Opts.Timeout + c.Margin // the socket gets --timeout; the rest of the work, the margin
	if c.Opts.Restart {
		budget += c.StartWait + c.Opts.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	done := make(chan Result, 1)
	go func() { done <- c.evaluate(ctx) }()
	var r Result
	select {
	case r = <-done:
	case <-ctx.Done():
		r = Result{Code: Unknown, Problems: []Problem{{Unknown, fmt.Sprintf("check timed out after %s", budget.Round(time.Millisecond))}}}
	}
	if !(c.Opts.Quiet && r.Code == OK) {
		fmt.Fprintln(w, r.Line())
	}
	return r.Code
}

// Problem is one finding of a check, with the code it calls for.
type Problem struct {
	Code int
	Text string
}

// Result is the outcome of a check.
type Result struct {
	Code     int
	Problems []Problem // most severe first
	Summary  string    // the gear and why, when the daemon answered
	Perf     []string  // perfdata, 'label'=value[UOM];warn;crit;min;max
}

// Line is the check's one line of output:
// GEARSHIFT <STATUS> - <problems; summary> | <perfdata>.
func (r Result) Line() string {
	var parts []string
	for _, p := range r.Problems {
		parts = append(parts, pluginText(p.Text))
	}
	if r.Summary != "" {
		parts = append(parts, pluginText(r.Summary))
	}
	s := "GEARSHIFT " + names[r.Code] + " - " + strings.Join(parts, "; ")
	if len(r.Perf) > 0 {
		s += " | " + strings.Join(r.Perf, " ")
	}
	return s
}

func (c *Checker) evaluate(ctx context.Context) Result {
	var pre []Problem
	st, err := c.query(ctx)
	if err != nil && c.Opts.Restart {
		var restarted bool
		restarted, st, err = c.restart(ctx, err)
		if restarted {
			pre = append(pre, Problem{Warning, "restarted: the daemon was not running"})
		}
	}
	if errors.Is(err, errNoAccess) {
		// The check cannot tell: the daemon may be fine.
		return Result{Code: Unknown, Problems: append(pre, Problem{Unknown, err.Error()})}
	}
	if err != nil {
		return judge(append(pre, Problem{Critical, err.Error()}), nil, c)
	}
	return judge(pre, st, c)
}

// query asks the daemon for its status within --timeout, and says why not
// when it cannot: not running, or running but silent.
func (c *Checker) query(ctx context.Context) (*api.Status, error) {
	qctx, cancel := context.WithTimeout(ctx, c.Opts.Timeout)
	defer cancel()
	st, err := c.Client.Status(qctx)
	if err == nil {
		return st, nil
	}
	var apiErr *api.APIError
	if errors.As(err, &apiErr) {
		return nil, fmt.Errorf("daemon answered with an error: %s", apiErr.Message)
	}
	if errors.Is(err, os.ErrPermission) {
		return nil, fmt.Errorf("%w %s: run the check as root or as a member of the config's control.group", errNoAccess, c.Config.Control.Socket)
	}
	if qctx.Err() != nil || errors.Is(err, api.ErrNoAnswer) {
		return nil, fmt.Errorf("daemon silent on %s for %s", c.Config.Control.Socket, timefmt.Short(c.Opts.Timeout))
	}
	pid, perr := c.Running()
	switch {
	case perr != nil:
		return nil, fmt.Errorf("daemon not reachable on %s (%v)", c.Config.Control.Socket, perr)
	case pid > 0:
		return nil, fmt.Errorf("daemon (pid %d) not answering on %s: %v", pid, c.Config.Control.Socket, trimUnreachable(err, c.Config.Control.Socket))
	}
	return nil, fmt.Errorf("%w (no answer on %s, no live process in %s)", errNotRunning, c.Config.Control.Socket, c.Config.PIDFile)
}

var errNotRunning = errors.New("daemon not running")

var errNoAccess = errors.New("no access to the control socket")

// trimUnreachable drops the client's "not reachable on <socket>: " prefix,
// which the caller words itself.
func trimUnreachable(err error, socket string) string {
	return strings.TrimPrefix(err.Error(), api.ErrUnreachable.Error()+" on "+socket+": ")
}

// restart starts the daemon when it is not running, under a lock that keeps
// overlapping runs (cron) from starting two. It returns the fresh status.
func (c *Checker) restart(ctx context.Context, cause error) (restarted bool, st *api.Status, err error) {
	if !errors.Is(cause, errNotRunning) {
		return false, nil, cause // running but silent: starting another would not help
	}
	if managed, serr := c.Systemd(ctx); serr == nil && managed {
		return false, nil, fmt.Errorf("%w; systemd manages gearshift.service, so --restart leaves it to systemd (systemctl status gearshift)", cause)
	}
	unlock, err := flockWait(ctx, c.LockPath)
	if err != nil {
		return false, nil, fmt.Errorf("%w; not restarted: %v", cause, err)
	}
	defer unlock()
	// Another run may have restarted it while this one waited for the lock.
	if st, err := c.query(ctx); err == nil {
		return false, st, nil
	} else if !errors.Is(err, errNotRunning) {
		return false, nil, err
	}
	if err := c.Start(ctx); err != nil {
		return false, nil, fmt.Errorf("%w; restart failed: %v", cause, err)
	}
	// Give the fresh daemon until --timeout to take its first sample and
	// bring the targets in sync before judging it.
	deadline := time.Now().Add(c.Opts.Timeout)
	for {
		st, err = c.query(ctx)
		if err != nil || Settled(st) || time.Now().After(deadline) {
			return true, st, err
		}
		select {
		case <-ctx.Done():
			return true, st, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Settled tells whether a daemon has sampled once and brought every
// target onto its gear.
func Settled(st *api.Status) bool {
	if st.Sample == nil {
		return false
	}
	for _, t := range st.Targets {
		if !t.Reachable || !t.InSync {
			return false
		}
	}
	return true
}

// ForeignWindow is how long check warns after gearshift undid someone
// else's change of its VCL (status foreign_vcl_at).
const ForeignWindow = time.Hour

// judge judges a status (nil when the daemon did not answer).
func judge(pre []Problem, st *api.Status, c *Checker) Result {
	problems := pre
	add := func(code int, format string, args ...any) {
		problems = append(problems, Problem{code, fmt.Sprintf(format, args...)})
	}
	var r Result
	now := c.Now()
	if st != nil {
		for _, t := range st.Targets {
			switch {
			case !t.Reachable:
				msg := "target " + t.Admin + " unreachable"
				if t.Error != "" {
					msg += ": " + t.Error
				}
				add(Critical, "%s", msg)
			case !t.InSync && st.VarnishMode == config.ModeLabel:
				on := t.LabelVCL
				if on == "" {
					on = "missing"
				}
				add(Critical, "target %s not in sync (label %s: %s)", t.Admin, profiles.Label, on)
			case !t.InSync:
				active := t.ActiveVCL
				if active == "" {
					active = "none"
				}
				add(Critical, "target %s not in sync (active VCL %s)", t.Admin, active)
			}
			if t.Reachable && t.Child != "" && t.Child != "running" {
				add(Critical, "target %s: varnish child %s, nothing is served (varnishadm start)", t.Admin, t.Child)
			}
			if at := t.ForeignVCLAt; at != nil && now.Sub(*at) < ForeignWindow {
				ago := timefmt.Short(max(0, now.Sub(*at)).Round(time.Second))
				if st.VarnishMode == config.ModeLabel {
					add(Warning, "target %s: label %s was moved outside gearshift %s ago and put back; pin a gear with gearshift force", t.Admin, profiles.Label, ago)
				} else {
					add(Warning, "target %s: active VCL changed outside gearshift %s ago (varnishreload?) and put back; to keep the site's own VCL active, set varnish.mode: label", t.Admin, ago)
				}
			}
		}
		if len(st.Targets) == 0 {
			add(Critical, "daemon reports no Varnish target")
		}
		switch {
		case st.Sample != nil:
			if age := now.Sub(st.Sample.Time); age > c.Opts.MaxAge {
				add(Critical, "last sample %s old (max %s)", timefmt.Short(age.Round(time.Second)), timefmt.Short(c.Opts.MaxAge))
			}
		case time.Duration(st.UptimeSeconds)*time.Second > c.Opts.MaxAge:
			add(Critical, "no sample although up for %s", timefmt.Short(time.Duration(st.UptimeSeconds)*time.Second))
		}
		if st.ConfigError != "" {
			add(Warning, "config reload failed, old config in force: %s", st.ConfigError)
		}
		if st.LogError != "" {
			add(Warning, "the daemon cannot write its log (it goes on switching): %s", st.LogError)
		}
		if st.Advice != "" {
			add(Warning, "%s", st.Advice)
		}
		if st.FrontDoor.MostlyUnidentified() {
			f := st.FrontDoor
			add(Warning, "%d of the last minute's %d requests unidentified: %s", f.Unidentified,
				f.Direct+f.ProxyProtocol+f.Forwarded+f.Unidentified, api.UnidentifiedAdvice)
		}
		if st.GuestError != "" {
			add(Warning, "guest pages off (heavy fetches them from the backend): %s", st.GuestError)
		}
		if st.HistoryError != "" {
			add(Warning, "the daemon cannot record its history (it goes on switching): %s", st.HistoryError)
		}
		if st.Mode == "forced" && c.Opts.WarnForced {
			until := "until gearshift auto"
			if st.ForcedUntil != nil {
				until = "for " + timefmt.Short(st.ForcedUntil.Sub(now).Round(time.Second)) + " more"
			}
			add(Warning, "gear pinned to %s %s", st.State, until)
		}
		for _, ws := range c.Opts.WarnStates {
			if ws == st.State {
				add(Warning, "gear is %s", st.State)
				break
			}
		}
		r.Summary = fmt.Sprintf("gear %s (%s, %s)", st.State, st.Mode, timefmt.Short(now.Sub(st.Since).Round(time.Second)))
		if st.Reason != "" {
			r.Summary += ": " + st.Reason
		}
		r.Perf = Perfdata(st, c.Config.ShownSignals(), now, c.Opts.MaxAge)
	}
	if c.ConfigErr != nil {
		add(Warning, "config %s does not validate, the next start or reload will fail: %s", c.ConfigPath, firstProblem(c.ConfigErr))
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Code > problems[j].Code })
	r.Problems = problems
	for _, p := range problems {
		r.Code = max(r.Code, p.Code)
	}
	if r.Code == OK && r.Summary == "" {
		r.Summary = "no status"
	}
	return r
}

// pluginText keeps a text to the one line monitoring systems read, and out of
// the way of the perfdata separator.
func pluginText(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
	s = strings.ReplaceAll(s, ":;", ":")
	return strings.ReplaceAll(s, "|", "/")
}

// Perfdata renders the status in the standard
// 'label'=value[UOM];warn;crit;min;max form, the signals described by set.
func Perfdata(st *api.Status, set *state.Set, now time.Time, maxAge time.Duration) []string {
	var p []string
	if s := st.Sample; s != nil {
		for _, sig := range set.All() {
			v, ok := s.Signal(sig.Name)
			if !ok {
				continue
			}
			limits := ""
			if !math.IsInf(sig.Min, -1) { // a signal with no lower bound (injected) leaves min empty
				limits = numfmt.Trim(sig.Min, sig.Precision)
			}
			if sig.Bounded() {
				limits += ";" + numfmt.Trim(sig.Max, sig.Precision)
			}
			p = append(p, fmt.Sprintf("'%s'=%s%s;;;%s", sig.Label(), numfmt.Trim(v, sig.Precision), sig.PerfUOM, limits))
		}
	}
	if gear, err := state.Parse(st.State); err == nil {
		p = append(p, fmt.Sprintf("'state'=%d;;;0;%d", int(gear), int(state.Heaviest)))
	}
	var sw float64
	for _, t := range st.Targets {
		sw = max(sw, t.LastSwitchMS)
	}
	if sw > 0 {
		p = append(p, fmt.Sprintf("'switch_ms'=%sms;;;0", numfmt.Trim(sw, 2)))
	} else {
		// No switch yet: unknown, as the plugin guidelines write it, not 0.
		p = append(p, "'switch_ms'=U;;;0")
	}
	if s := st.Sample; s != nil {
		p = append(p, fmt.Sprintf("'sample_age'=%ss;;%s;0", numfmt.Trim(max(0, now.Sub(s.Time).Seconds()), 1), numfmt.Trim(maxAge.Seconds(), 1)))
	}
	return p
}

func firstProblem(err error) string {
	var ce *config.Error
	if errors.As(err, &ce) && len(ce.Problems) > 0 {
		s := ce.Problems[0].String()
		if n := len(ce.Problems); n > 1 {
			s += fmt.Sprintf(" (and %d more: gearshift config check)", n-1)
		}
		return s
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// flockWait takes an exclusive flock on path, waiting until ctx is done.
// The lock goes with the process, so a killed check never leaves it behind.
func flockWait(ctx context.Context, path string) (unlock func(), err error) {
	// The lock sits beside the pid file, often in the control socket's
	// directory: create that 0755, like the daemon does (see start).
	if err := api.MkdirAllMode(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("another check holds %s", path)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StartDetached runs `gearshift start` (exe) and waits for it: it returns
// once the new daemon answers on its socket.
func StartDetached(ctx context.Context, exe, configPath string, configSet bool) error {
	args := []string{"start"}
	if configSet {
		args = append(args, "--config", configPath)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// The detached daemon inherits nothing to wait for: WaitDelay only
	// guards against a stuck pipe.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out.String()), "gearshift: "))
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(strings.TrimSuffix(msg, "."))
	}
	return nil
}

// SystemdManages tells whether systemd runs this host and knows
// gearshift.service as enabled or active: then restarting is its job.
func SystemdManages(ctx context.Context) (bool, error) {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return false, nil
	}
	for _, verb := range []string{"is-enabled", "is-active"} {
		cmd := exec.CommandContext(ctx, "systemctl", verb, "--quiet", "gearshift.service")
		if err := cmd.Run(); err == nil {
			return true, nil
		}
	}
	return false, nil
}

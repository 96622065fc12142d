package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/profiles"
)

// Monitoring-plugin exit codes (SPEC section 9).
const (
	checkOK       = 0
	checkWarning  = 1
	checkCritical = 2
	checkUnknown  = 3
)

// defaultStartWait bounds how long start (and check --restart) waits for a
// new daemon to answer on its socket: it loads three VCL programs into every
// target first.
const defaultStartWait = 60 * time.Second

var checkNames = [...]string{"OK", "WARNING", "CRITICAL", "UNKNOWN"}

// checkOptions are the flags of `gearshift check`.
type checkOptions struct {
	timeout    time.Duration
	maxAge     time.Duration
	warnStates []string
	warnForced bool
	restart    bool
	quiet      bool
}

// statusGetter is what check asks of the daemon.
type statusGetter interface {
	Status(ctx context.Context) (*controller.Status, error)
}

// checker runs one health check. Its edges (the daemon, the clock, starting
// the daemon, systemd) are fields so that tests can replace them.
type checker struct {
	opts      checkOptions
	cfg       *profiles.Config
	cfgErr    error  // the config file does not validate; the daemon runs with what it loaded
	cfgPath   string // where the config comes from
	client    statusGetter
	now       func() time.Time
	running   func() (pid int, err error)             // the daemon's pid from the pid file, 0 when none runs
	start     func(ctx context.Context) error         // starts the daemon (--restart)
	systemd   func(ctx context.Context) (bool, error) // whether systemd manages gearshift on this host
	lockPath  string
	startWait time.Duration
	margin    time.Duration // beyond --timeout, for the check's own work
}

func newCheckCmd(a *app) *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Health check with monitoring-plugin exit codes (Nagios, Icinga, cron)",
		Long: `Check the running daemon and print one line:
  GEARSHIFT <STATUS> - <summary> | <perfdata>
Exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.

CRITICAL: the daemon is not running or its socket is silent past --timeout; a
Varnish target is unreachable or not in sync; the last sample is older than
--max-age.
WARNING: a config reload failed (the old config stays in force); the config
file does not validate (the next start or reload would fail); the gear is
pinned and --warn-forced is given; the gear is one of --warn-state; the daemon
was restarted by --restart.
UNKNOWN: bad flags, or the check itself ran past --timeout.

With --restart a daemon that is not running is started (gearshift start). On a
host where systemd manages gearshift.service, --restart leaves restarting to
systemd and only reports.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				fmt.Fprintf(a.stdout, "GEARSHIFT UNKNOWN - check takes no arguments, got %q\n", args)
				return &exitError{code: checkUnknown, err: errors.New("")}
			}
			return nil
		},
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return a.check(ctxOrBackground(cmd.Context()), o)
		}),
	}
	// Bad flags are UNKNOWN to a monitoring system, not a usage error.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		fmt.Fprintf(a.stdout, "GEARSHIFT UNKNOWN - %v\n", err)
		return &exitError{code: checkUnknown, err: errors.New("")}
	})
	f := cmd.Flags()
	f.DurationVar(&o.timeout, "timeout", 5*time.Second, "CRITICAL when the daemon's socket is silent this long; UNKNOWN when the check itself runs past it")
	f.DurationVar(&o.maxAge, "max-age", 30*time.Second, "CRITICAL when the daemon's last sample is older")
	f.StringArrayVar(&o.warnStates, "warn-state", nil, "WARNING while the gear is this state ("+strings.Join(state.Names(), ", ")+"; repeatable)")
	f.BoolVar(&o.warnForced, "warn-forced", false, "WARNING while the gear is pinned (gearshift force)")
	f.BoolVar(&o.restart, "restart", false, "start the daemon when it is not running, and report WARNING restarted")
	f.BoolVar(&o.quiet, "quiet", false, "print nothing when OK (cron mails only problems)")
	return cmd
}

func (a *app) check(ctx context.Context, o checkOptions) (int, error) {
	if err := o.validate(); err != nil {
		fmt.Fprintf(a.stdout, "GEARSHIFT UNKNOWN - %v\n", err)
		return checkUnknown, nil
	}
	cfg, cfgErr := a.checkConfig()
	exe, _ := os.Executable()
	c := &checker{
		opts:      o,
		cfg:       cfg,
		cfgErr:    cfgErr,
		cfgPath:   a.configSource(),
		client:    controller.NewClient(cfg.Control.Socket),
		now:       time.Now,
		running:   func() (int, error) { return runningPID(cfg.PIDFile) },
		start:     func(ctx context.Context) error { return startDetached(ctx, exe, a.configPath, a.configSet) },
		systemd:   systemdManages,
		lockPath:  filepath.Join(filepath.Dir(cfg.PIDFile), "check.lock"),
		startWait: defaultStartWait,
		margin:    time.Second,
	}
	return c.run(ctx, a.stdout), nil
}

// checkConfig returns the config that names the daemon's socket and pid
// file, and what is wrong with the file on disk, judged on its own: a check
// often runs unprivileged (a monitoring agent) and cannot open the admin
// secret; the daemon reports a reload it refused itself (config_error).
// A file the check may not read leaves it the defaults, without a warning.
func (a *app) checkConfig() (*profiles.Config, error) {
	b, err := os.ReadFile(a.configPath)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && !a.configSet:
		return profiles.Default(), nil
	case errors.Is(err, os.ErrPermission):
		return profiles.Default(), nil
	default:
		return profiles.Default(), fmt.Errorf("read config: %w", err)
	}
	cfg, err := profiles.ParseSettings(b)
	if err == nil {
		return cfg, nil
	}
	if lenient, lerr := profiles.LoadLenient(a.configPath); lerr == nil {
		return lenient, err
	}
	return profiles.Default(), err
}

func (o checkOptions) validate() error {
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", o.timeout)
	}
	if o.maxAge <= 0 {
		return fmt.Errorf("--max-age must be positive, got %s", o.maxAge)
	}
	for _, s := range o.warnStates {
		if _, err := state.Parse(s); err != nil {
			return fmt.Errorf("--warn-state: %v", err)
		}
	}
	return nil
}

// run performs the check, prints its line (unless quiet and OK) and returns
// the exit code. Past its own deadline it answers UNKNOWN, whatever hangs.
func (c *checker) run(ctx context.Context, w io.Writer) int {
	budget := c.opts.timeout + c.margin // the socket gets --timeout; the rest of the work, the margin
	if c.opts.restart {
		budget += c.startWait + c.opts.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	done := make(chan checkResult, 1)
	go func() { done <- c.evaluate(ctx) }()
	var r checkResult
	select {
	case r = <-done:
	case <-ctx.Done():
		r = checkResult{code: checkUnknown, problems: []checkProblem{{checkUnknown, fmt.Sprintf("check timed out after %s", budget.Round(time.Millisecond))}}}
	}
	if !(c.opts.quiet && r.code == checkOK) {
		fmt.Fprintln(w, r.line())
	}
	return r.code
}

type checkProblem struct {
	code int
	text string
}

type checkResult struct {
	code     int
	problems []checkProblem // most severe first
	summary  string         // the gear and why, when the daemon answered
	perf     []string
}

func (r checkResult) line() string {
	var parts []string
	for _, p := range r.problems {
		parts = append(parts, pluginText(p.text))
	}
	if r.summary != "" {
		parts = append(parts, pluginText(r.summary))
	}
	s := "GEARSHIFT " + checkNames[r.code] + " - " + strings.Join(parts, "; ")
	if len(r.perf) > 0 {
		s += " | " + strings.Join(r.perf, " ")
	}
	return s
}

func (c *checker) evaluate(ctx context.Context) checkResult {
	var pre []checkProblem
	st, err := c.query(ctx)
	if err != nil && c.opts.restart {
		var restarted bool
		restarted, st, err = c.restart(ctx, err)
		if restarted {
			pre = append(pre, checkProblem{checkWarning, "restarted: the daemon was not running"})
		}
	}
	if err != nil {
		return judgeStatus(append(pre, checkProblem{checkCritical, err.Error()}), nil, c)
	}
	return judgeStatus(pre, st, c)
}

// query asks the daemon for its status within --timeout, and says why not
// when it cannot: not running, or running but silent.
func (c *checker) query(ctx context.Context) (*controller.Status, error) {
	qctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	st, err := c.client.Status(qctx)
	if err == nil {
		return st, nil
	}
	var apiErr *controller.APIError
	if errors.As(err, &apiErr) {
		return nil, fmt.Errorf("daemon answered with an error: %s", apiErr.Message)
	}
	if qctx.Err() != nil || errors.Is(err, controller.ErrNoAnswer) {
		return nil, fmt.Errorf("daemon silent on %s for %s", c.cfg.Control.Socket, opsDuration(c.opts.timeout))
	}
	pid, perr := c.running()
	switch {
	case perr != nil:
		return nil, fmt.Errorf("daemon not reachable on %s (%v)", c.cfg.Control.Socket, perr)
	case pid > 0:
		return nil, fmt.Errorf("daemon (pid %d) not answering on %s: %v", pid, c.cfg.Control.Socket, trimUnreachable(err, c.cfg.Control.Socket))
	}
	return nil, fmt.Errorf("%w (no answer on %s, no live process in %s)", errNotRunning, c.cfg.Control.Socket, c.cfg.PIDFile)
}

var errNotRunning = errors.New("daemon not running")

// trimUnreachable drops the client's "not reachable on <socket>: " prefix,
// which the caller words itself.
func trimUnreachable(err error, socket string) string {
	return strings.TrimPrefix(err.Error(), controller.ErrUnreachable.Error()+" on "+socket+": ")
}

// opsDuration formats d as "30m", "1h2m", "3s": what an operator reads.
func opsDuration(d time.Duration) string { return profiles.Duration(d).String() }

// restart starts the daemon when it is not running, under a lock that keeps
// overlapping runs (cron) from starting two. It returns the fresh status.
func (c *checker) restart(ctx context.Context, cause error) (restarted bool, st *controller.Status, err error) {
	if !errors.Is(cause, errNotRunning) {
		return false, nil, cause // running but silent: starting another would not help
	}
	if managed, serr := c.systemd(ctx); serr == nil && managed {
		return false, nil, fmt.Errorf("%w; systemd manages gearshift.service, so --restart leaves it to systemd (systemctl status gearshift)", cause)
	}
	unlock, err := flockWait(ctx, c.lockPath)
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
	if err := c.start(ctx); err != nil {
		return false, nil, fmt.Errorf("%w; restart failed: %v", cause, err)
	}
	// Give the fresh daemon until --timeout to take its first sample and
	// bring the targets in sync before judging it.
	deadline := time.Now().Add(c.opts.timeout)
	for {
		st, err = c.query(ctx)
		if err != nil || statusSettled(st) || time.Now().After(deadline) {
			return true, st, err
		}
		select {
		case <-ctx.Done():
			return true, st, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// statusSettled tells whether a daemon has sampled once and brought every
// target onto its gear.
func statusSettled(st *controller.Status) bool {
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

// judgeStatus judges a status (nil when the daemon did not answer).
func judgeStatus(pre []checkProblem, st *controller.Status, c *checker) checkResult {
	problems := pre
	add := func(code int, format string, args ...any) {
		problems = append(problems, checkProblem{code, fmt.Sprintf(format, args...)})
	}
	var r checkResult
	now := c.now()
	if st != nil {
		for _, t := range st.Targets {
			switch {
			case !t.Reachable:
				msg := "target " + t.Admin + " unreachable"
				if t.Error != "" {
					msg += ": " + t.Error
				}
				add(checkCritical, "%s", msg)
			case !t.InSync:
				active := t.ActiveVCL
				if active == "" {
					active = "none"
				}
				add(checkCritical, "target %s not in sync (active VCL %s)", t.Admin, active)
			}
		}
		if len(st.Targets) == 0 {
			add(checkCritical, "daemon reports no Varnish target")
		}
		switch {
		case st.Sample != nil:
			if age := now.Sub(st.Sample.Time); age > c.opts.maxAge {
				add(checkCritical, "last sample %s old (max %s)", opsDuration(age.Round(time.Second)), opsDuration(c.opts.maxAge))
			}
		case time.Duration(st.UptimeSeconds)*time.Second > c.opts.maxAge:
			add(checkCritical, "no sample although up for %s", opsDuration(time.Duration(st.UptimeSeconds)*time.Second))
		}
		if st.ConfigError != "" {
			add(checkWarning, "config reload failed, old config in force: %s", st.ConfigError)
		}
		if st.Mode == "forced" && c.opts.warnForced {
			until := "until gearshift auto"
			if st.ForcedUntil != nil {
				until = "for " + opsDuration(st.ForcedUntil.Sub(now).Round(time.Second)) + " more"
			}
			add(checkWarning, "gear pinned to %s %s", st.State, until)
		}
		for _, ws := range c.opts.warnStates {
			if ws == st.State {
				add(checkWarning, "gear is %s", st.State)
				break
			}
		}
		r.summary = fmt.Sprintf("gear %s (%s, %s)", st.State, st.Mode, opsDuration(now.Sub(st.Since).Round(time.Second)))
		if st.Reason != "" {
			r.summary += ": " + st.Reason
		}
		r.perf = perfdata(st, now, c.opts.maxAge)
	}
	if c.cfgErr != nil {
		add(checkWarning, "config %s does not validate, the next start or reload will fail: %s", c.cfgPath, firstProblem(c.cfgErr))
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].code > problems[j].code })
	r.problems = problems
	for _, p := range problems {
		r.code = max(r.code, p.code)
	}
	if r.code == checkOK && r.summary == "" {
		r.summary = "no status"
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

// perfdata renders the status in the standard 'label'=value[UOM];warn;crit;min;max form.
func perfdata(st *controller.Status, now time.Time, maxAge time.Duration) []string {
	var p []string
	if s := st.Sample; s != nil {
		for _, sig := range state.Table() {
			v, ok := s.Signal(sig.Name)
			if !ok {
				continue
			}
			limits := opsNum(sig.Min, sig.Precision)
			if sig.Bounded() {
				limits += ";" + opsNum(sig.Max, sig.Precision)
			}
			p = append(p, fmt.Sprintf("'%s'=%s%s;;;%s", sig.Label(), opsNum(v, sig.Precision), sig.PerfUOM, limits))
		}
	}
	if gear, err := state.Parse(st.State); err == nil {
		p = append(p, fmt.Sprintf("'state'=%d;;;0;%d", int(gear), int(state.Heaviest)))
	}
	var sw float64
	for _, t := range st.Targets {
		sw = max(sw, t.LastSwitchMS)
	}
	p = append(p, fmt.Sprintf("'switch_ms'=%sms;;;0", opsNum(sw, 2)))
	if s := st.Sample; s != nil {
		p = append(p, fmt.Sprintf("'sample_age'=%ss;;%s;0", opsNum(max(0, now.Sub(s.Time).Seconds()), 1), opsNum(maxAge.Seconds(), 1)))
	}
	return p
}

// opsNum formats v with at most prec decimals, without trailing zeros.
func opsNum(v float64, prec int) string {
	s := fmt.Sprintf("%.*f", prec, v)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func firstProblem(err error) string {
	var ce *profiles.Error
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
	if err := controller.MkdirAllMode(filepath.Dir(path), 0o755); err != nil {
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

// startDetached runs `gearshift start` (exe) and waits for it: it returns
// once the new daemon answers on its socket.
func startDetached(ctx context.Context, exe, configPath string, configSet bool) error {
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

// systemdManages tells whether systemd runs this host and knows
// gearshift.service as enabled or active: then restarting is its job.
func systemdManages(ctx context.Context) (bool, error) {
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

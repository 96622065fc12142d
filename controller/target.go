package controller

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/profiles"
)

// Backoff bounds of the retries against a failing target.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// ownName matches the names gearshift gives its profiles; only these are
// ever discarded (a temporary name used by `profiles check` is not).
var ownName = regexp.MustCompile(`^` + regexp.QuoteMeta(profiles.NamePrefix) + `(` + state.OneOf("|") + `)-[0-9a-f]{8}$`)

// target is the loop's view of one Varnish instance. While busy, a sync
// goroutine owns every field but busy and shown; the loop owns them all
// otherwise.
type target struct {
	busy   bool             // a sync is in flight (loop only)
	shown  api.TargetStatus // the last status published while idle (loop only)
	result struct {         // of the last sync, read once it ended
		ms       float64
		switched bool
	}

	addr, secretFile string
	dial             DialFunc
	metrics          targetMetrics
	timeout          time.Duration
	loadTimeout      time.Duration // bound of one profile load (compile)
	refusedBackoff   time.Duration // backoff cap while the port refuses (0: maxBackoff)
	log              *zap.Logger

	mode      string // varnish.mode
	conn      Target
	lastUsed  string // what gearshift last made active (labelled) on this manager
	active    string
	label     string    // what the label gearshift points to (label mode)
	foreignAt time.Time // when gearshift's VCL was last found changed by someone else
	unusedLab bool      // "no VCL uses the label" was logged
	// reconnected: the client opened a new session (it re-dialled a lost
	// connection) since the last sync that succeeded. A VCL found changed
	// then is put back without calling it foreign: a restarted manager
	// booted with -I (profiles export) runs the exported gear, not the
	// current one.
	reconnected bool
	sessions    int64 // t.conn.Sessions() at the last list
	reachable   bool
	child       string // the cache child's state; "" while unknown
	inSync      bool
	contacted   bool
	lastSwitch  float64 // ms
	err         string

	failures  int
	backoff   time.Duration
	retryAt   time.Time
	downSince time.Time
	noDiscard map[string]bool // discards Varnish refused, not retried
	// plain: this Varnish cannot import varnish-modules; it runs the
	// profiles' Plain twins. Learned from its compiler, tried again once
	// the manager may have changed (a new admin session).
	plain         bool
	plainSessions int64 // t.conn.Sessions() when plain was learned
}

// profiles is set, or its Plain twins for a Varnish without
// varnish-modules.
func (t *target) profiles(set *profiles.Set) *profiles.Set {
	if t.plain {
		return set.Plain()
	}
	return set
}

// learnPlain reports whether err is this Varnish's compiler refusing
// varnish-modules while the full profiles were tried; the target then
// runs the Plain twins, and says so once.
func (t *target) learnPlain(err error) bool {
	if t.plain || !profiles.MissingModules(err) {
		return false
	}
	t.plain, t.plainSessions = true, t.conn.Sessions()
	t.log.Warn("varnish-modules (xkey, vsthrottle) are missing in this Varnish: " +
		"its profiles drop a session's pages with bans and keep no client budget (apt install varnish-modules)")
	return true
}

// makeTargets returns the targets of cfg, reusing those of old with the
// same address and secret file, and apply, which gives the reused ones
// cfg's mode and timeouts. A reload calls apply at its commit point only, so that
// one that fails leaves the running targets as they were; new targets get
// them at once.
func (c *Controller) makeTargets(cfg *config.Config, old []*target) (ts []*target, apply func()) {
	timeout := time.Duration(cfg.Varnish.Timeout)
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	loadTimeout := max(timeout, compileTimeout)
	refused := max(time.Duration(cfg.PollInterval), minBackoff)
	var reused []*target
	for _, tc := range cfg.Varnish.Targets {
		var t *target
		for _, o := range old {
			if o.addr == tc.Admin && o.secretFile == tc.SecretFile {
				t = o
				break
			}
		}
		if t == nil {
			t = &target{
				addr:           tc.Admin,
				secretFile:     tc.SecretFile,
				dial:           c.opts.Dial,
				metrics:        c.metrics.target(tc.Admin),
				log:            c.log.With(zap.String(logging.FieldTarget, tc.Admin)),
				noDiscard:      map[string]bool{},
				mode:           cfg.Varnish.Mode,
				timeout:        timeout,
				loadTimeout:    loadTimeout,
				refusedBackoff: refused,
			}
		} else {
			reused = append(reused, t)
		}
		ts = append(ts, t)
	}
	return ts, func() {
		for _, t := range reused {
			t.mode, t.timeout, t.loadTimeout, t.refusedBackoff = cfg.Varnish.Mode, timeout, loadTimeout, refused
		}
	}
}

// status is the target's status, in sync when it runs p (or p's Plain
// twin, on a Varnish without varnish-modules).
func (t *target) status(p profiles.Profile) api.TargetStatus {
	plain, _ := p.Plain()
	if t.busy {
		// t.plain is the sync's: either twin will do.
		st := t.shown
		runs := func(name string) bool { return name == p.Name || name == plain.Name }
		if !runs(st.ActiveVCL) && (t.mode != config.ModeLabel || !runs(st.LabelVCL)) {
			st.InSync = false
			if st.Error == "" {
				st.Error = "busy with an earlier command (slow to answer?): it follows once that ends"
			}
		}
		return st
	}
	want := p.Name
	if t.plain {
		want = plain.Name
	}
	t.shown = t.statusNow(want)
	return t.shown
}

func (t *target) statusNow(want string) api.TargetStatus {
	err := t.err
	if err == "" && !t.contacted && !t.reachable {
		err = "not contacted yet: the first poll is loading the profiles"
	}
	st := api.TargetStatus{
		Admin:        t.addr,
		Reachable:    t.reachable,
		ActiveVCL:    t.active,
		InSync:       t.inSync && t.active == want,
		LastSwitchMS: t.lastSwitch,
		Child:        t.child,
		Error:        err,
	}
	if t.mode == config.ModeLabel {
		st.LabelVCL = t.label
		st.InSync = t.inSync && t.label == want
	}
	if !t.foreignAt.IsZero() {
		at := t.foreignAt
		st.ForeignVCLAt = &at
	}
	return st
}

func (t *target) close() {
	if t.conn != nil {
		t.conn.Close()
		t.conn = nil
	}
}

// compileTimeout is the least time a profile load is given: compiling a
// VCL takes far longer than anything else Varnish is asked.
const compileTimeout = 30 * time.Second

// cmdCtx bounds one admin command.
func (t *target) cmdCtx(ctx context.Context, compile bool) (context.Context, context.CancelFunc) {
	if compile {
		return context.WithTimeout(ctx, t.loadTimeout)
	}
	return context.WithTimeout(ctx, t.timeout)
}

// connect makes sure the target has its admin client. The client is made
// once and kept: it dials on its first command and dials again by itself
// after a lost connection (see Target), so the target never re-dials.
func (t *target) connect() error {
	if t.conn != nil {
		return nil
	}
	conn, err := t.dial(t.addr, t.secretFile)
	if err != nil {
		return fmt.Errorf("connect to varnish admin %s: %w", t.addr, err)
	}
	t.conn, t.sessions = conn, 0
	return nil
}

// sync makes the target's active VCL set[want]. It returns the switch time
// in ms when it switched. Errors are recorded on the target and retried
// with backoff.
func (t *target) sync(ctx context.Context, now time.Time, set *profiles.Set, want state.State) (float64, bool) {
	if t.failures > 0 && now.Before(t.retryAt) {
		return 0, false
	}
	if err := t.connect(); err != nil {
		t.fail(now, err)
		return 0, false
	}
	// Reconnecting is the client's job: a connection the peer closed
	// before answering is re-dialled and the command sent once more; a
	// command that timed out is not sent again. The target only decides
	// when to try again (backoff) and tells a re-dialled session by
	// Sessions.
	if t.plain && t.conn.Sessions() != t.plainSessions {
		t.plain = false // a new session: perhaps a manager with the modules
	}
	ms, switched, err := t.reconcile(ctx, now, t.profiles(set), want)
	if err != nil && t.learnPlain(err) {
		ms, switched, err = t.reconcile(ctx, now, t.profiles(set), want)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Stopping (or the request gave up): not Varnish's fault.
			return ms, switched
		}
		t.fail(now, err)
		return ms, switched
	}
	t.reconnected = false
	t.recover(now)
	return ms, switched
}

func (t *target) reconcile(ctx context.Context, now time.Time, set *profiles.Set, want state.State) (float64, bool, error) {
	vcls, err := t.list(ctx)
	if err != nil {
		return 0, false, err
	}
	t.reachable = true
	if n := t.conn.Sessions(); n != t.sessions {
		t.reconnected = t.reconnected || t.sessions != 0 // a session after the first: the client re-dialled
		t.sessions = n
	}
	present := map[string]bool{}
	active := ""
	for _, v := range vcls {
		present[v.Name] = true
		if v.Active {
			active = v.Name
		}
	}
	t.active = active
	if err := t.checkChild(ctx); err != nil {
		return 0, false, err
	}

	missing := 0
	for _, p := range set {
		if !present[p.Name] {
			missing++
		}
	}
	if missing > 0 {
		switch {
		case t.lastUsed != "" && !present[t.lastUsed]:
			t.log.Warn("varnish lost gearshift's profiles (manager restarted?): loading them again",
				zap.Int(logging.FieldMissing, missing))
		case !t.contacted:
			t.log.Info("loading profiles", zap.Int(logging.FieldMissing, missing))
		default:
			t.log.Info("loading new profiles", zap.Int(logging.FieldMissing, missing))
		}
		if t.lastUsed != "" && !present[t.lastUsed] {
			t.lastUsed = ""
		}
	}

	// The gear that should be active first, and switch to it, then the
	// other two: after a manager restart the right gear serves after one
	// compile instead of three.
	desired := set[want].Name
	if !present[desired] {
		if err := t.load(ctx, set[want]); err != nil {
			return 0, false, err
		}
		present[desired] = true
	}
	var ms float64
	var switched bool
	if t.mode == config.ModeLabel {
		ms, switched, err = t.syncLabel(ctx, now, vcls, desired, want)
	} else {
		ms, switched, err = t.syncActive(ctx, now, active, desired, want)
	}
	if err != nil {
		return 0, false, err
	}
	t.lastUsed = desired
	for _, p := range set {
		if present[p.Name] {
			continue
		}
		if err := t.load(ctx, p); err != nil {
			return ms, switched, err
		}
	}
	t.contacted = true
	t.inSync = true
	return ms, switched, t.discardStale(ctx, vcls, set, desired)
}

// syncActive makes desired the active VCL.
func (t *target) syncActive(ctx context.Context, now time.Time, active, desired string, want state.State) (float64, bool, error) {
	return t.switchTo(ctx, now, switchMode{
		command: t.conn.VCLUse,
		wrap: func(err error) error {
			return fmt.Errorf("switch %s to %s: %w", t.addr, desired, err)
		},
		switched:    "vcl switched",
		reconnected: "active VCL not gearshift's after reconnecting (manager restarted?): switching back",
		foreign:     "active VCL changed outside gearshift",
		currentKey:  logging.FieldActiveVCL,
		hint:        foreignHint,
		field:       &t.active,
	}, active, true, desired, want)
}

// switchMode is what tells a switch of active mode (vcl.use) from one of
// label mode (vcl.label) in switchTo.
type switchMode struct {
	command     func(ctx context.Context, vcl string) error // makes vcl the one that serves
	wrap        func(err error) error                       // the command's error, with what it did and where
	switched    string                                      // logged once switched
	reconnected string                                      // logged when a reconnect explains the VCL found
	foreign     string                                      // logged when someone else changed it
	currentKey  string                                      // the field that names the VCL found
	extra       []zap.Field                                 // first in every message
	hint        string                                      // for an operator who changed it
	field       *string                                     // the target's record of what serves
}

// switchTo switches from current, what the target serves now, to desired,
// saying first when current is not what gearshift left (found false:
// there is no current, and the caller said why).
func (t *target) switchTo(ctx context.Context, now time.Time, m switchMode,
	current string, found bool, desired string, want state.State) (float64, bool, error) {
	if current == desired {
		return 0, false, nil
	}
	fields := func(f ...zap.Field) []zap.Field { return append(slices.Clip(m.extra), f...) }
	switch {
	case !found || t.lastUsed == "" || current == t.lastUsed:
	case t.reconnected:
		t.log.Info(m.reconnected, fields(zap.String(m.currentKey, current), zap.String(logging.FieldTo, want.String()))...)
	default:
		t.foreignAt = now
		t.log.Warn(m.foreign, fields(zap.String(m.currentKey, current), zap.String(logging.FieldExpected, t.lastUsed),
			zap.String(logging.FieldTo, want.String()), zap.String(logging.FieldHint, m.hint))...)
	}
	cctx, cancel := t.cmdCtx(ctx, false)
	start := time.Now()
	err := m.command(cctx, desired)
	elapsed := time.Since(start)
	cancel()
	if err != nil {
		return 0, false, m.wrap(err)
	}
	t.metrics.switches.Observe(elapsed.Seconds())
	ms := round(float64(elapsed.Microseconds())/1000, 3)
	t.lastSwitch = ms
	t.log.Info(m.switched, fields(zap.String(logging.FieldFromVCL, current), zap.String(logging.FieldVCL, desired),
		zap.String(logging.FieldTo, want.String()), zap.Float64(logging.FieldSwitchMS, ms))...)
	*m.field = desired
	return ms, true, nil
}

// foreignHint is what the log says to an operator whose own vcl.use (a
// varnishreload, `systemctl reload varnish`) gearshift has just undone.
const foreignHint = "gearshift keeps its profile active in varnish.mode active; to keep the site's own VCL active " +
	"(varnishreload, systemctl reload varnish), set varnish.mode: label and hand requests to " +
	"vcl(" + profiles.Label + ") from the site's VCL (see docs/gears.md, \"Label mode\"); to pin a gear, use gearshift force"

// discardStale discards gearshift's own profiles that are not in set and
// that nothing references: not the active VCL, not the target of any
// label (Varnish refuses those). labelled is what the label gearshift
// points to now, whatever vcls said before a relabel.
func (t *target) discardStale(ctx context.Context, vcls []VCL, set *profiles.Set, labelled string) error {
	keep := map[string]bool{}
	for _, p := range set {
		keep[p.Name] = true
	}
	for _, v := range vcls {
		if v.Label != "" && (v.Name != profiles.Label || t.mode != config.ModeLabel) {
			keep[v.Label] = true
		}
	}
	keep[t.active] = true // as it is now, after a switch
	if t.mode == config.ModeLabel {
		keep[labelled] = true
	}
	for _, v := range vcls {
		if !ownName.MatchString(v.Name) || keep[v.Name] || t.noDiscard[v.Name] {
			continue
		}
		cctx, cancel := t.cmdCtx(ctx, false)
		err := t.conn.VCLDiscard(cctx, v.Name)
		cancel()
		if err != nil {
			if !isCommandError(err) {
				return fmt.Errorf("discard %s on %s: %w", v.Name, t.addr, err)
			}
			// Still referenced (a label), say: leave it, and say so once.
			t.noDiscard[v.Name] = true
			t.log.Warn("discard stale profile", zap.String(logging.FieldVCL, v.Name), zap.Error(err))
			continue
		}
		t.log.Info("discarded stale profile", zap.String(logging.FieldVCL, v.Name))
	}
	return nil
}

func (t *target) list(ctx context.Context) ([]VCL, error) {
	cctx, cancel := t.cmdCtx(ctx, false)
	defer cancel()
	vcls, err := t.conn.VCLList(cctx)
	if err != nil {
		return nil, fmt.Errorf("list VCLs on %s: %w", t.addr, err)
	}
	return vcls, nil
}

// checkChild records the cache child's state, logging when it stops
// serving and when it serves again. gearshift does not start a child an
// operator stopped; status and check report it. A manager that does not
// understand the question leaves the state unknown.
func (t *target) checkChild(ctx context.Context) error {
	cctx, cancel := t.cmdCtx(ctx, false)
	defer cancel()
	child, err := t.conn.ChildState(cctx)
	if err != nil {
		if !isCommandError(err) {
			return fmt.Errorf("ask the child's state on %s: %w", t.addr, err)
		}
		child = ""
	}
	switch {
	case child == t.child:
	case child == "running" && t.child != "":
		t.log.Info("varnish child running again")
	case child != "running" && child != "":
		t.log.Warn("varnish child not running: nothing is served (varnishadm start)", zap.String(logging.FieldChild, child))
	}
	t.child = child
	return nil
}

func (t *target) load(ctx context.Context, p profiles.Profile) error {
	cctx, cancel := t.cmdCtx(ctx, true)
	defer cancel()
	if err := t.conn.VCLInline(cctx, p.Name, p.VCL, "warm"); err != nil {
		return fmt.Errorf("load profile %s into %s: %w", p.Name, t.addr, p.RedactError(err))
	}
	delete(t.noDiscard, p.Name)
	return nil
}

func (t *target) fail(now time.Time, err error) {
	if t.failures == 0 {
		t.downSince = now
		t.backoff = minBackoff
	} else if t.backoff *= 2; t.backoff > maxBackoff {
		t.backoff = maxBackoff
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) && t.refusedBackoff > 0 && t.backoff > t.refusedBackoff:
		// Nothing listens: a manager being restarted. Trying once a poll
		// costs nothing and picks it up as soon as it is back.
		t.backoff = t.refusedBackoff
	case varnishadm.ChildLost(err):
		// The cache child died under the command (killed, crashed); its
		// manager answers and starts a new one at once: the next poll
		// finds it, and the gear it should serve follows within a poll.
		t.backoff = 0
	}
	t.failures++
	t.metrics.errors.Inc()
	t.retryAt = now.Add(t.backoff)
	t.inSync = false
	t.err = err.Error()
	if !isCommandError(err) {
		t.reachable = false
		t.active, t.label, t.child = "", "", ""
	}
	if logWorthy(t.failures) {
		t.log.Error("varnish target failing", zap.Error(err), zap.Int(logging.FieldFailures, t.failures),
			zap.Duration(logging.FieldRetryIn, t.backoff))
	}
}

func (t *target) recover(now time.Time) {
	if t.failures > 0 {
		t.log.Info("varnish reachable again", zap.Int(logging.FieldFailures, t.failures),
			zap.Duration(logging.FieldDownFor, now.Sub(t.downSince).Round(time.Millisecond)))
	}
	t.failures, t.backoff, t.err = 0, 0, ""
}

// isCommandError reports whether err is one Varnish answered (a rejected
// command, a VCL that does not compile: a *varnishadm.CLIError) or one
// gearshift drew from an answer (errLabelIsVCL), as opposed to a broken
// connection: the controller keeps the connection.
func isCommandError(err error) bool {
	return errors.As(err, new(*varnishadm.CLIError)) || errors.Is(err, errLabelIsVCL)
}

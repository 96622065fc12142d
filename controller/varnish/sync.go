package varnish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/profiles"
)

// Sync makes the target run set[want] (its Plain twin on a Varnish without
// varnish-modules): it loads the profiles missing, the wanted one first,
// switches to it (vcl.use, or vcl.label in label mode) and discards stale
// ones. It returns the switch time in ms when it switched. An error is
// recorded on the target (Status) and retried with backoff: until then
// Sync does nothing.
func (t *Target) Sync(ctx context.Context, now time.Time, set *profiles.Set, want state.Gear) (switchMS float64, switched bool) {
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

func (t *Target) reconcile(ctx context.Context, now time.Time, set *profiles.Set, want state.Gear) (float64, bool, error) {
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
	if t.settings.Mode == config.ModeLabel {
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
func (t *Target) syncActive(ctx context.Context, now time.Time, active, desired string, want state.Gear) (float64, bool, error) {
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
func (t *Target) switchTo(ctx context.Context, now time.Time, m switchMode,
	current string, found bool, desired string, want state.Gear) (float64, bool, error) {
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
	t.metrics.Switches.Observe(elapsed.Seconds())
	ms := numfmt.Round(float64(elapsed.Microseconds())/1000, 3)
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
func (t *Target) discardStale(ctx context.Context, vcls []VCL, set *profiles.Set, labelled string) error {
	keep := map[string]bool{}
	for _, p := range set {
		keep[p.Name] = true
	}
	for _, v := range vcls {
		if v.Label != "" && (v.Name != profiles.Label || t.settings.Mode != config.ModeLabel) {
			keep[v.Label] = true
		}
	}
	keep[t.active] = true // as it is now, after a switch
	if t.settings.Mode == config.ModeLabel {
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
			if !IsCommandError(err) {
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

func (t *Target) list(ctx context.Context) ([]VCL, error) {
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
func (t *Target) checkChild(ctx context.Context) error {
	cctx, cancel := t.cmdCtx(ctx, false)
	defer cancel()
	child, err := t.conn.ChildState(cctx)
	if err != nil {
		if !IsCommandError(err) {
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

func (t *Target) load(ctx context.Context, p profiles.Profile) error {
	cctx, cancel := t.cmdCtx(ctx, true)
	defer cancel()
	if err := t.conn.VCLInline(cctx, p.Name, p.VCL, "warm"); err != nil {
		return fmt.Errorf("load profile %s into %s: %w", p.Name, t.addr, p.RedactError(err))
	}
	delete(t.noDiscard, p.Name)
	return nil
}

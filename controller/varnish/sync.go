package varnish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	return t.attempt(ctx, now, func() (float64, bool, error) {
		return t.reconcile(ctx, now, t.profiles(set), want)
	})
}

// attempt runs one reconcile against the target, unless it is backing off:
// it dials first, runs reconcile once more with the Plain twins when the
// compiler refuses varnish-modules, and records a failure (backoff) or a
// success.
func (t *Target) attempt(ctx context.Context, now time.Time, reconcile func() (float64, bool, error)) (switchMS float64, switched bool) {
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
	ms, switched, err := reconcile()
	if err != nil && t.learnPlain(err) {
		ms, switched, err = reconcile()
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
	vcls, present, err := t.observe(ctx)
	if err != nil {
		return 0, false, err
	}
	active := t.active

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
	t.lastSites, t.sitesLoaded = nil, "" // no sites now: their labels go with the stale
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

// discardStale discards gearshift's own VCLs that are not in set and
// that nothing references: routers and site labels left by a config with
// sites, and profiles that are not the active VCL nor the target of any
// label (Varnish refuses those). labelled is what the label gearshift
// points to now, whatever vcls said before a relabel.
func (t *Target) discardStale(ctx context.Context, vcls []VCL, set *profiles.Set, labelled string) error {
	keep := map[string]bool{}
	for _, p := range set {
		keep[p.Name] = true
	}
	now := map[string]string{}
	if t.settings.Mode == config.ModeLabel {
		now[profiles.Label] = labelled
	}
	return t.discard(ctx, vcls, keep, now)
}

// discard discards gearshift's own VCLs that are not in keep: first the
// routers that are not active, then the site labels (a router's go first:
// it references them), then the profiles no label left references.
// labels are the labels gearshift has just pointed elsewhere, by name,
// whatever vcls said.
func (t *Target) discard(ctx context.Context, vcls []VCL, keep map[string]bool, labels map[string]string) error {
	keep[t.active] = true // as it is now, after a switch
	var routers, siteLabels, programs []string
	referenced := map[string]bool{}
	for _, v := range vcls {
		switch {
		case ownRouter.MatchString(v.Name):
			routers = append(routers, v.Name)
		case v.Label != "" && strings.HasPrefix(v.Name, profiles.SiteLabelPrefix) && !keep[v.Name]:
			siteLabels = append(siteLabels, v.Name)
		case v.Label != "":
			to := v.Label
			if now, ok := labels[v.Name]; ok {
				to = now
			}
			referenced[to] = true
		case ownName.MatchString(v.Name):
			programs = append(programs, v.Name)
		}
	}
	for _, to := range labels {
		referenced[to] = true
	}
	var stale []string
	for _, name := range routers {
		if !keep[name] {
			stale = append(stale, name)
		}
	}
	stale = append(stale, siteLabels...)
	for _, name := range programs {
		if !keep[name] && !referenced[name] {
			stale = append(stale, name)
		}
	}
	for _, name := range stale {
		if t.noDiscard[name] {
			continue
		}
		cctx, cancel := t.cmdCtx(ctx, false)
		err := t.conn.VCLDiscard(cctx, name)
		cancel()
		if err != nil {
			if !IsCommandError(err) {
				return fmt.Errorf("discard %s on %s: %w", name, t.addr, err)
			}
			// Still referenced (a label), say: leave it, and say so once.
			t.noDiscard[name] = true
			t.log.Warn("discard stale profile", zap.String(logging.FieldVCL, name), zap.Error(err))
			continue
		}
		t.log.Info("discarded stale profile", zap.String(logging.FieldVCL, name))
	}
	return nil
}

// observe lists the target's VCLs and asks for its cache child: what is
// loaded (present, by name), what is active (t.active) and whether the
// admin session is a new one (t.reconnected).
func (t *Target) observe(ctx context.Context) ([]VCL, map[string]bool, error) {
	vcls, err := t.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	t.reachable = true
	if n := t.conn.Sessions(); n != t.sessions {
		t.reconnected = t.reconnected || t.sessions != 0 // a session after the first: the client re-dialled
		t.sessions = n
	}
	present := map[string]bool{}
	t.active = ""
	for _, v := range vcls {
		present[v.Name] = true
		if v.Active {
			t.active = v.Name
		}
	}
	if err := t.checkChild(ctx); err != nil {
		return nil, nil, err
	}
	return vcls, present, nil
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

package controller

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/profiles"
)

// syncLabel points the label gearshift at desired (label mode). The active
// VCL is the site's and is never touched: it hands the requests it wants
// to gearshift with return (vcl(gearshift)), so a relabel moves them to
// another gear at once, and a varnishreload of the site's VCL keeps them
// on the current one.
func (t *target) syncLabel(ctx context.Context, now time.Time, vcls []VCL, desired string, want state.State) (float64, bool, error) {
	current, found := "", false
	for _, v := range vcls {
		if v.Name != profiles.Label {
			continue
		}
		if v.Label == "" {
			return 0, false, &CommandError{Err: fmt.Errorf("label %s on %s: a VCL program named %q is loaded, not a label; discard it (varnishadm vcl.discard %s) so that gearshift can label its profiles",
				profiles.Label, t.addr, profiles.Label, profiles.Label)}
		}
		current, found = v.Label, true
		switch {
		case v.Refs > 0:
			t.unusedLab = false
		case !t.unusedLab:
			t.unusedLab = true
			t.log.Warn("no VCL hands requests to the label: every gear serves the same", zap.String("label", profiles.Label),
				zap.String("active_vcl", t.active),
				zap.String("hint", "add the snippet of scripts/varnish/gearshift-label.vcl to the site's VCL (see the README, \"Label mode\")"))
		}
	}
	t.label = current
	if current == desired {
		return 0, false, nil
	}
	switch {
	case !found && t.lastUsed != "":
		t.log.Warn("varnish lost the label (manager restarted?): labelling again", zap.String("label", profiles.Label))
	case found && t.lastUsed != "" && current != t.lastUsed && t.reconnected:
		t.log.Info("label not on the current gear after reconnecting (manager restarted?): labelling again",
			zap.String("label", profiles.Label), zap.String("label_vcl", current), zap.String("to", want.String()))
	case found && t.lastUsed != "" && current != t.lastUsed:
		t.foreignAt = now
		t.log.Warn("label changed outside gearshift", zap.String("label", profiles.Label), zap.String("label_vcl", current),
			zap.String("expected", t.lastUsed), zap.String("to", want.String()),
			zap.String("hint", "to pin a gear, use gearshift force"))
	}
	cctx, cancel := t.cmdCtx(ctx, false)
	start := time.Now()
	err := t.conn.VCLLabel(cctx, profiles.Label, desired)
	elapsed := time.Since(start)
	cancel()
	if err != nil {
		return 0, false, fmt.Errorf("label %s on %s: %w", desired, t.addr, err)
	}
	t.metrics.switches.Observe(elapsed.Seconds())
	ms := round(float64(elapsed.Microseconds())/1000, 3)
	t.lastSwitch = ms
	t.log.Info("vcl relabelled", zap.String("label", profiles.Label), zap.String("from_vcl", current),
		zap.String("vcl", desired), zap.String("to", want.String()), zap.Float64("switch_ms", ms))
	t.label = desired
	return ms, true, nil
}

// gearOf returns the gear whose profile the target runs: the active VCL in
// active mode, the label's VCL in label mode ("" when it runs none).
func gearOf(mode string, vcls []VCL) string {
	for _, v := range vcls {
		name := ""
		switch {
		case mode == config.ModeLabel && v.Name == profiles.Label:
			name = v.Label
		case mode != config.ModeLabel && v.Active:
			name = v.Name
		}
		if m := ownName.FindStringSubmatch(name); m != nil {
			return m[1]
		}
	}
	return ""
}

package varnish

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/profiles"
)

// errLabelIsVCL is why label mode cannot label: the label's name is taken
// by a VCL program. Varnish answered; the connection is fine (see
// IsCommandError).
var errLabelIsVCL = fmt.Errorf("a VCL program named %q is loaded, not a label", profiles.Label)

// syncLabel points the label gearshift at desired (label mode). The active
// VCL is the site's and is never touched: it hands the requests it wants
// to gearshift with return (vcl(gearshift)), so a relabel moves them to
// another gear at once, and a varnishreload of the site's VCL keeps them
// on the current one.
func (t *Target) syncLabel(ctx context.Context, now time.Time, vcls []VCL, desired string, want state.Gear) (float64, bool, error) {
	current, found := "", false
	for _, v := range vcls {
		if v.Name != profiles.Label {
			continue
		}
		if v.Label == "" {
			return 0, false, fmt.Errorf("label %s on %s: %w; discard it (varnishadm vcl.discard %s) so that gearshift can label its profiles",
				profiles.Label, t.addr, errLabelIsVCL, profiles.Label)
		}
		current, found = v.Label, true
		switch {
		case v.Refs > 0:
			t.unusedLab = false
		case !t.unusedLab:
			t.unusedLab = true
			t.log.Warn("no VCL hands requests to the label: every gear serves the same",
				zap.String(logging.FieldLabel, profiles.Label), zap.String(logging.FieldActiveVCL, t.active),
				zap.String(logging.FieldHint, "add the snippet of scripts/varnish/gearshift-label.vcl to the site's VCL (see docs/gears.md, \"Label mode\")"))
		}
	}
	t.label = current
	if !found && t.lastUsed != "" { // switchTo says nothing of a VCL not found
		t.log.Warn("varnish lost the label (manager restarted?): labelling again", zap.String(logging.FieldLabel, profiles.Label))
	}
	return t.switchTo(ctx, now, switchMode{
		command: func(ctx context.Context, vcl string) error {
			return t.conn.VCLLabel(ctx, profiles.Label, vcl)
		},
		wrap: func(err error) error {
			return fmt.Errorf("label %s on %s: %w", desired, t.addr, err)
		},
		switched:    "vcl relabelled",
		reconnected: "label not on the current gear after reconnecting (manager restarted?): labelling again",
		foreign:     "label changed outside gearshift",
		currentKey:  logging.FieldLabelVCL,
		extra:       []zap.Field{zap.String(logging.FieldLabel, profiles.Label)},
		hint:        "to pin a gear, use gearshift force",
		field:       &t.label,
	}, current, found, desired, want)
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

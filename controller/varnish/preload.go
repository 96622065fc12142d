package varnish

import (
	"context"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/profiles"
)

// Preload loads the profiles of set into a connected, healthy target (a
// target without a connection, or failing, is left alone), and returns
// the names it loaded: Unload discards them if the reload is abandoned.
func (t *Target) Preload(ctx context.Context, set *profiles.Set) ([]string, error) {
	loaded, err := t.preloadSet(ctx, t.profiles(set))
	if err != nil && t.learnPlain(err) {
		t.Unload(ctx, loaded)
		return t.preloadSet(ctx, t.profiles(set))
	}
	return loaded, err
}

func (t *Target) preloadSet(ctx context.Context, set *profiles.Set) ([]string, error) {
	if t.conn == nil || t.failures > 0 {
		return nil, nil
	}
	vcls, err := t.list(ctx)
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for _, v := range vcls {
		present[v.Name] = true
	}
	var loaded []string
	for _, p := range set {
		if present[p.Name] {
			continue
		}
		if err := t.load(ctx, p); err != nil {
			return loaded, err
		}
		loaded = append(loaded, p.Name)
	}
	return loaded, nil
}

// Unload discards names, best effort (rolling back an abandoned reload).
func (t *Target) Unload(ctx context.Context, names []string) {
	if t.conn == nil {
		return
	}
	for _, n := range names {
		cctx, cancel := t.cmdCtx(ctx, false)
		if err := t.conn.VCLDiscard(cctx, n); err != nil {
			t.log.Warn("discard abandoned profile", zap.String(logging.FieldVCL, n), zap.Error(err))
		}
		cancel()
	}
}

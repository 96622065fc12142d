package varnish

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/profiles"
)

// Sites is what a target runs when the config has sites: the profiles of
// each distinct set of site overrides, each site's label on the profile
// of its gear, and the router, the active VCL, that hands every request
// to its site's label (not in label mode: there the site's own VCL does,
// with the exported snippet).
type Sites struct {
	Sets   []*profiles.Set
	Labels []SiteLabel
	Router profiles.Profile
}

// SiteLabel is one site's label: the site, its set of profiles (an index
// in Sites.Sets) and its gear.
type SiteLabel struct {
	Site string
	Set  int
	Gear state.Gear
}

// SyncSites makes the target run sites: it loads the profiles the labels
// want first, points every site's label at its gear's profile (one
// vcl.label a site), loads the router and makes it active, loads the
// other profiles and discards what is stale (routers, labels of sites
// gone, profiles nothing references). It returns the longest relabel in
// ms when a label moved. Errors are recorded and retried with backoff, as
// Sync's.
func (t *Target) SyncSites(ctx context.Context, now time.Time, sites *Sites) (switchMS float64, switched bool) {
	return t.attempt(ctx, now, func() (float64, bool, error) {
		return t.reconcileSites(ctx, now, sites)
	})
}

// sitesRelist is how long a target in sync with the same sites goes
// without listing its VCLs: a list of 300 labels costs a poll ten times
// what one of a site does, so between two the target only relabels what
// the loop moved. A foreign relabel, a stopped child or a restarted
// manager is seen within it (a shift meanwhile finds a restarted manager
// at once: its command fails, and the next sync looks again).
const sitesRelist = 10 * time.Second

// sitesKey names what a Sites loads: its router and every profile.
func (t *Target) sitesKey(sites *Sites) string {
	var b strings.Builder
	b.WriteString(sites.Router.Name)
	for _, set := range sites.Sets {
		for _, p := range t.profiles(set) {
			b.WriteString(" " + p.Name)
		}
	}
	return b.String()
}

func (t *Target) reconcileSites(ctx context.Context, now time.Time, sites *Sites) (float64, bool, error) {
	key := t.sitesKey(sites)
	if t.inSync && key == t.sitesLoaded && !t.reconnected && t.conn.Sessions() == t.sessions && now.Sub(t.listedAt) < sitesRelist {
		return t.relabel(ctx, sites)
	}
	vcls, present, err := t.observe(ctx)
	if err != nil {
		return 0, false, err
	}
	sets := make([]*profiles.Set, len(sites.Sets))
	for i, set := range sites.Sets {
		sets[i] = t.profiles(set)
	}
	want := func(l SiteLabel) profiles.Profile { return sets[l.Set][l.Gear] }
	load := func(p profiles.Profile) error {
		if present[p.Name] {
			return nil
		}
		if err := t.load(ctx, p); err != nil {
			return err
		}
		present[p.Name] = true
		return nil
	}

	// The profiles the labels want first: after a manager restart every
	// site serves its gear after as few compiles as there are gears in use.
	for _, l := range sites.Labels {
		if err := load(want(l)); err != nil {
			return 0, false, err
		}
	}
	labels := map[string]string{}
	for _, v := range vcls {
		if v.Label != "" {
			labels[v.Name] = v.Label
		} else if strings.HasPrefix(v.Name, profiles.SiteLabelPrefix) {
			return 0, false, fmt.Errorf("label %s on %s: a VCL program of that name is loaded, not a label; discard it (varnishadm vcl.discard %s)",
				v.Name, t.addr, v.Name)
		}
	}
	longest, switched := 0.0, false
	for _, l := range sites.Labels {
		label, to := profiles.SiteLabel(l.Site), want(l).Name
		from, found := labels[label]
		if from == to {
			continue
		}
		if found && t.lastSites[label] != "" && from != t.lastSites[label] && !t.reconnected {
			t.foreignAt = now
			t.log.Warn("site label changed outside gearshift", zap.String(logging.FieldLabel, label),
				zap.String(logging.FieldLabelVCL, from), zap.String(logging.FieldExpected, t.lastSites[label]),
				zap.String(logging.FieldHint, "to pin a site's gear, use gearshift force GEAR --site NAME"))
		}
		ms, err := t.labelSite(ctx, l, from, to)
		if err != nil {
			return longest, switched, err
		}
		longest, switched = max(longest, ms), true
		labels[label] = to
	}
	t.lastSites = map[string]string{}
	for _, l := range sites.Labels {
		t.lastSites[profiles.SiteLabel(l.Site)] = want(l).Name
	}

	if t.settings.Mode != config.ModeLabel {
		if err := t.useRouter(ctx, now, load, sites.Router); err != nil {
			return longest, switched, err
		}
	}
	for _, set := range sets {
		for _, p := range set {
			if err := load(p); err != nil {
				return longest, switched, err
			}
		}
	}
	t.contacted, t.inSync = true, true
	t.sitesLoaded, t.listedAt = key, now

	keep := map[string]bool{sites.Router.Name: true}
	for _, set := range sets {
		for _, p := range set {
			keep[p.Name] = true
		}
	}
	for label := range t.lastSites {
		keep[label] = true
	}
	return longest, switched, t.discard(ctx, vcls, keep, t.lastSites)
}

// relabel points the labels the loop moved at their gear's profile, on a
// target in sync whose VCLs have not changed since it last listed them.
func (t *Target) relabel(ctx context.Context, sites *Sites) (float64, bool, error) {
	longest, switched := 0.0, false
	for _, l := range sites.Labels {
		label, to := profiles.SiteLabel(l.Site), t.profiles(sites.Sets[l.Set])[l.Gear].Name
		from := t.lastSites[label]
		if from == to {
			continue
		}
		ms, err := t.labelSite(ctx, l, from, to)
		if err != nil {
			t.inSync = false // the next sync looks again
			return longest, switched, err
		}
		longest, switched = max(longest, ms), true
		t.lastSites[label] = to
	}
	return longest, switched, nil
}

// labelSite points l's site label, on from, at the profile to, and
// returns how long that took in ms, counted and logged as a switch.
func (t *Target) labelSite(ctx context.Context, l SiteLabel, from, to string) (float64, error) {
	label := profiles.SiteLabel(l.Site)
	cctx, cancel := t.cmdCtx(ctx, false)
	start := time.Now()
	err := t.conn.VCLLabel(cctx, label, to)
	elapsed := time.Since(start)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("label %s %s on %s: %w", label, to, t.addr, err)
	}
	t.metrics.Switches.Observe(elapsed.Seconds())
	ms := numfmt.Round(float64(elapsed.Microseconds())/1000, 3)
	t.lastSwitch = ms
	t.log.Info("site relabelled", zap.String(logging.FieldSite, l.Site), zap.String(logging.FieldFromVCL, from),
		zap.String(logging.FieldVCL, to), zap.String(logging.FieldTo, l.Gear.String()), zap.Float64(logging.FieldSwitchMS, ms))
	return ms, nil
}

// useRouter loads the router and makes it the active VCL, saying so when
// someone else had made another one active.
func (t *Target) useRouter(ctx context.Context, now time.Time, load func(profiles.Profile) error, router profiles.Profile) error {
	if err := load(router); err != nil {
		return err
	}
	if t.active == router.Name {
		t.lastUsed = router.Name
		return nil
	}
	if t.lastUsed != "" && t.active != "" && t.active != t.lastUsed && !t.reconnected && !ownName.MatchString(t.active) && !ownRouter.MatchString(t.active) {
		t.foreignAt = now
		t.log.Warn("active VCL changed outside gearshift", zap.String(logging.FieldActiveVCL, t.active),
			zap.String(logging.FieldExpected, t.lastUsed), zap.String(logging.FieldHint, foreignHint))
	}
	cctx, cancel := t.cmdCtx(ctx, false)
	err := t.conn.VCLUse(cctx, router.Name)
	cancel()
	if err != nil {
		return fmt.Errorf("switch %s to %s: %w", t.addr, router.Name, err)
	}
	t.log.Info("router active", zap.String(logging.FieldFromVCL, t.active), zap.String(logging.FieldVCL, router.Name))
	t.active, t.lastUsed = router.Name, router.Name
	return nil
}

// siteGears returns the gear each site label points at, by site; nil
// when there is none.
func siteGears(vcls []VCL) map[string]string {
	var gears map[string]string
	for _, v := range vcls {
		site, ok := strings.CutPrefix(v.Name, profiles.SiteLabelPrefix)
		if !ok || v.Label == "" {
			continue
		}
		if m := ownName.FindStringSubmatch(v.Label); m != nil {
			if gears == nil {
				gears = map[string]string{}
			}
			gears[site] = m[1]
		}
	}
	return gears
}

// SitesStatus is the target's status against sites: in sync when every
// site's label is on its gear's profile and, but in label mode, the
// router is active.
func (t *Target) SitesStatus(sites *Sites) api.TargetStatus {
	st := t.statusNow(t.active)
	inSync := t.inSync
	for _, l := range sites.Labels {
		p := sites.Sets[l.Set][l.Gear]
		if t.plain {
			p, _ = p.Plain()
		}
		inSync = inSync && t.lastSites[profiles.SiteLabel(l.Site)] == p.Name
	}
	if t.settings.Mode != config.ModeLabel {
		inSync = inSync && t.active == sites.Router.Name
	}
	st.InSync = inSync
	return st
}

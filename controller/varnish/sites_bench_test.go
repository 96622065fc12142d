package varnish

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// BenchmarkSitesScale runs a host of 300 sites beside one of a single
// site, side by side on one varnishd each: the config's checks, the
// profiles' rendering, the first sync (three profiles and the router
// compiled), the VCLs Varnish keeps loaded, a one-site shift (a
// vcl.label, its p99 over 400 as the command took, like 0.4's switch) and
// a poll's sync with nothing to change (its mean: the daemon's work per
// poll with Varnish, a poll a second). The two hosts take turns, a shift
// and a poll each, so that what else the machine does weighs on both
// alike. Each is reported for both and as a ratio (300 sites over 1),
// and a poll beside a host without a sites key's (0.4's).
func BenchmarkSitesScale(b *testing.B) {
	type run struct {
		check, render, first, router time.Duration
		loaded                       int
		shifts, polls                []time.Duration

		rg    *rig
		sites Sites
	}
	setup := func(b *testing.B, n int) *run {
		r := &run{}
		v := varnishtest.Start(b, varnishtest.Config{})
		cfg := testConfig(v)
		cfg.PollInterval = config.Default().PollInterval // checked as the daemon's
		for i := range n {
			cfg.Sites = append(cfg.Sites, config.Site{Name: fmt.Sprintf("site-%d", i), Hosts: []string{fmt.Sprintf("site%d.example", i), fmt.Sprintf("*.site%d.example", i)}})
		}
		start := time.Now()
		if err := cfg.ValidateSettings(); err != nil {
			b.Fatal(err)
		}
		r.check = time.Since(start)
		start = time.Now()
		set, err := profiles.Build(cfg.Site())
		if err != nil {
			b.Fatal(err)
		}
		r.render = time.Since(start)
		var routes []profiles.Route
		r.sites = Sites{Sets: []*profiles.Set{&set}}
		for _, s := range cfg.SiteList(0) {
			routes = append(routes, profiles.Route{Site: s.Name, Hosts: s.Hosts})
			r.sites.Labels = append(r.sites.Labels, SiteLabel{Site: s.Name})
		}
		if r.sites.Router, err = profiles.Router(routes); err != nil {
			b.Fatal(err)
		}
		r.rg = newRigOn(b, v, func(c *config.Config) { *c = *cfg })
		ctx := context.Background()
		start = time.Now()
		r.rg.t.SyncSites(ctx, r.rg.now, &r.sites)
		r.first = time.Since(start)
		if st := r.rg.t.SitesStatus(&r.sites); !st.InSync {
			b.Fatalf("%d sites: not in sync after the first sync: %+v", n, st)
		}
		vcls, err := r.rg.cmds.Admin.VCLList(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, vc := range vcls {
			if vc.Label == "" && vc.Name != "boot" {
				r.loaded++
			}
		}
		// The router alone, compiled again under another name.
		start = time.Now()
		if err := r.rg.cmds.Admin.VCLInline(ctx, "router-again", r.sites.Router.VCL, "warm"); err != nil {
			b.Fatal(err)
		}
		r.router = time.Since(start)
		r.rg.cmds.Admin.VCLDiscard(ctx, "router-again")
		return r
	}
	// step shifts one site (its label, from light to heavy or back) and
	// then polls a second later, in sync.
	step := func(b *testing.B, r *run, i int) {
		ctx := context.Background()
		r.sites.Labels[1].Gear = []state.Gear{state.Heavy, state.Light}[i%2]
		ms, switched := r.rg.t.SyncSites(ctx, r.rg.now, &r.sites)
		if !switched {
			b.Fatalf("%d sites: shift %d did not switch", len(r.sites.Labels)-1, i)
		}
		r.shifts = append(r.shifts, time.Duration(ms*float64(time.Millisecond)))
		r.rg.now = r.rg.now.Add(time.Second) // a poll a second, as the daemon's default
		start := time.Now()
		if _, switched := r.rg.t.SyncSites(ctx, r.rg.now, &r.sites); switched {
			b.Fatalf("%d sites: a poll in sync switched", len(r.sites.Labels)-1)
		}
		r.polls = append(r.polls, time.Since(start))
	}
	p99 := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)*99/100]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	mean := func(d []time.Duration) time.Duration {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return sum / time.Duration(len(d))
	}
	for i := 0; i < b.N; i++ {
		// A host without a sites key (0.4): its poll lists the VCLs each
		// time; it takes its turn after the two others.
		single := newRig(b, nil)
		single.sync(b, state.Light)
		var plain []time.Duration
		one, many := setup(b, 1), setup(b, 300)
		for i := range 400 {
			step(b, one, i)
			step(b, many, i)
			start := time.Now()
			if _, switched := single.sync(b, state.Light); switched {
				b.Fatal("a poll in sync switched")
			}
			plain = append(plain, time.Since(start))
		}
		if many.loaded != 4 {
			b.Errorf("300 sites keep %d VCLs loaded, want four (three profiles and the router)", many.loaded)
		}
		b.ReportMetric(ms(many.check), "check-300-ms")
		b.ReportMetric(ms(many.render), "render-300-ms")
		b.ReportMetric(float64(many.first.Milliseconds()), "first-sync-300-ms")
		b.ReportMetric(float64(many.router.Milliseconds()), "router-compile-300-ms")
		b.ReportMetric(float64(many.loaded), "loaded-vcls-300")
		b.ReportMetric(ms(p99(one.shifts)), "shift-p99-1-ms")
		b.ReportMetric(ms(p99(many.shifts)), "shift-p99-300-ms")
		b.ReportMetric(float64(p99(many.shifts))/float64(p99(one.shifts)), "shift-p99-ratio")
		b.ReportMetric(ms(mean(plain)), "poll-nosites-ms")
		b.ReportMetric(float64(mean(many.polls))/float64(mean(plain)), "poll-300-vs-nosites")
		b.ReportMetric(ms(mean(one.polls)), "poll-1-ms")
		b.ReportMetric(ms(mean(many.polls)), "poll-300-ms")
		b.ReportMetric(float64(mean(many.polls))/float64(mean(one.polls)), "poll-ratio")
	}
}

package system

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/promtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// fleetSiteGearQuery is the recipe of docs/fleet.md, "A fleet with
// sites": the highest forced gear of each site over the fleet, one series
// per site.
const fleetSiteGearQuery = "max by (site) (gearshift_site_gear_level * gearshift_site_forced)"

// wantSiteGears checks each site's gear and mode in a status.
func wantSiteGears(s *api.Status, want map[string]string, mode string) error {
	for name, gear := range want {
		site, ok := s.Site(name)
		if !ok {
			return fmt.Errorf("no site %s", name)
		}
		if site.Gear != gear || site.Mode != mode {
			return fmt.Errorf("site %s %s %s (%s), want %s %s", name, site.Gear, site.Mode, site.Reason, gear, mode)
		}
	}
	return nil
}

// TestSitesFleet runs two web nodes with the same sites, each a varnishd
// and a daemon, and Debian's prometheus scraping both daemons' metrics:
// forcing one site on one node brings that site, and only it, to the same
// gear on the other node; releasing it brings it down there; a pin of
// every site on one node brings every site on the other.
func TestSitesFleet(t *testing.T) {
	promtest.Tool(t, "prometheus")
	metrics := []string{testenv.FreeAddr(t), testenv.FreeAddr(t)}
	prom := promtest.StartJobs(t, map[string][]string{"gearshift": metrics})
	var nodes []*runningDaemon
	for i := range metrics {
		nodes = append(nodes, launchDaemon(t, func(cfg *config.Config) {
			sitesConfig(cfg)
			cfg.PollInterval = timefmt.Duration(time.Second)
			cfg.MetricsListen = metrics[i]
			cfg.Sensor.Prometheus = config.Default().Sensor.Prometheus
			cfg.Sensor.Prometheus.URL = prom.URL
			cfg.Sensor.Prometheus.Signals = map[string]string{"fleet_site_gear": fleetSiteGearQuery}
			cfg.States.Moderate.Enter["fleet_site_gear"] = 1
			cfg.States.Moderate.Stay["fleet_site_gear"] = 1
			cfg.States.Heavy.Enter["fleet_site_gear"] = 2
			cfg.States.Heavy.Stay["fleet_site_gear"] = 2
		}, "NOTIFY_SOCKET="))
	}
	light := map[string]string{"default": "light", "shop": "light", "wiki": "light"}
	every(t, nodes, "every site light, the router in sync", 90*time.Second, func(s *api.Status) error {
		if len(s.Targets) != 1 || !s.Targets[0].InSync || !strings.HasPrefix(s.Targets[0].ActiveVCL, "gearshift-router-") {
			return fmt.Errorf("targets %+v", s.Targets)
		}
		return wantSiteGears(s, light, "auto")
	})
	// Prometheus has scraped both nodes' sites: the query answers a
	// series per site.
	testenv.Eventually(t, "the fleet's sites in prometheus", 30*time.Second, func() bool {
		v, err := prom.Query(fleetSiteGearQuery)
		return err == nil && len(v) == 3
	})

	if out, errOut, code := nodes[0].gs("force", "heavy", "--site", "shop"); code != exitOK {
		t.Fatalf("force heavy --site shop: exit %d\n%s%s", code, out, errOut)
	}
	nodes[1].eventually("the shop heavy on the other node", 30*time.Second, func() error {
		s, err := nodes[1].status()
		if err != nil {
			return err
		}
		if err := wantSiteGears(s, map[string]string{"shop": "heavy"}, "auto"); err != nil {
			return err
		}
		if shop, _ := s.Site("shop"); !strings.HasPrefix(shop.Reason, "site shop: fleet_site_gear 2.00 >= 2") {
			return fmt.Errorf("shop heavy for %q, want the fleet's site gear", shop.Reason)
		}
		return nil
	})
	// Its neighbours never moved: every poll of the other node's while
	// the shop climbed left them light.
	for range 5 {
		s, err := nodes[1].status()
		if err != nil {
			t.Fatal(err)
		}
		if err := wantSiteGears(s, map[string]string{"default": "light", "wiki": "light"}, "auto"); err != nil {
			t.Error(err)
		}
		if _, ok := s.Sample.Signal("fleet_site_gear"); ok {
			t.Error("fleet_site_gear is a server signal too: a per-site answer must move the sites alone")
		}
		time.Sleep(time.Second)
	}
	if out, errOut, code := nodes[0].gs("auto", "--site", "shop"); code != exitOK {
		t.Fatalf("auto --site shop: exit %d\n%s%s", code, out, errOut)
	}
	every(t, nodes, "the shop down on every node", 60*time.Second, func(s *api.Status) error {
		return wantSiteGears(s, light, "auto")
	})

	// A pin of every site on one node: every site on the other.
	if out, errOut, code := nodes[0].gs("force", "moderate"); code != exitOK {
		t.Fatalf("force moderate: exit %d\n%s%s", code, out, errOut)
	}
	nodes[1].eventually("every site moderate on the other node", 30*time.Second, func() error {
		s, err := nodes[1].status()
		if err != nil {
			return err
		}
		return wantSiteGears(s, map[string]string{"default": "moderate", "shop": "moderate", "wiki": "moderate"}, "auto")
	})
	if out, errOut, code := nodes[0].gs("auto"); code != exitOK {
		t.Fatalf("auto: exit %d\n%s%s", code, out, errOut)
	}
	every(t, nodes, "every site down on every node", 60*time.Second, func(s *api.Status) error {
		return wantSiteGears(s, light, "auto")
	})
}

package system

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// A site's own PHP-FPM pool moves that site alone: Apache's event MPM in
// front of a real php-fpm pool that sites_config gives the shop; more
// slow requests than the pool has children put the shop in heavy (every
// child busy) while the wiki and the default site stay light, and the
// server's own phpfpm signals know nothing of the pool; once the requests
// are served the shop comes back down.
func TestSitesOwnPoolOnPHPFPM(t *testing.T) {
	bin := lampstack.Need(t, "apache2", lampstack.ApachePrograms...)
	dir := t.TempDir()
	root := filepath.Join(dir, "site")
	lampstack.WriteFile(t, filepath.Join(root, "slow.php"), "<?php usleep((int)($_GET['ms'] ?? 0) * 1000); echo \"slept\\n\";\n")
	lampstack.Searchable(t, root)
	a := lampstack.Apache{Dir: filepath.Join(dir, "apache"), Root: root, Port: lampstack.FreePort(t), Stack: lampstack.FPM, Probe: "/slow.php"}
	lampstack.StartApache(t, a, bin)

	d := launchDaemon(t, func(cfg *config.Config) {
		sitesConfig(cfg)
		cfg.Backend = profiles.BackendAt("127.0.0.1", a.Port)
		cfg.Sensor.PHPFPM = config.Default().Sensor.PHPFPM
		cfg.Sensor.PHPFPM.Timeout = timefmt.Duration(time.Second)
		// The pool of lampstack's FPM stack is [site].
		cfg.Sensor.PHPFPM.Pools = []sensor.PHPFPMPool{{Name: "site", Socket: a.FPMStatusSocket(), Listen: a.FPMSocket(), Path: "/fpm-status"}}
		cfg.Sites[0].PHPFPMPool = "site"
		// The phpfpm source's default rules (quietThresholds replaced them).
		cfg.States.Moderate.Enter[sensor.PHPFPMQueue] = 1
		cfg.States.Moderate.Stay[sensor.PHPFPMQueue] = 1
		cfg.States.Heavy.Enter[sensor.PHPFPMBusyRatio] = 0.9
		cfg.States.Heavy.Stay[sensor.PHPFPMBusyRatio] = 0.7
	}, "NOTIFY_SOCKET=")
	light := map[string]string{"default": "light", "shop": "light", "wiki": "light"}
	d.eventually("every site light, the router in sync", 90*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if len(s.Targets) != 1 || !s.Targets[0].InSync || !strings.HasPrefix(s.Targets[0].ActiveVCL, "gearshift-router-") {
			return fmt.Errorf("targets %+v", s.Targets)
		}
		return wantSiteGears(s, light, "auto")
	})

	// More slow requests than children, straight to Apache: every child
	// busy, the rest waiting in the pool's queue.
	const extra = 4
	var wg sync.WaitGroup
	url := fmt.Sprintf("http://127.0.0.1:%d/slow.php?ms=4000", a.Port)
	for range lampstack.FPMMaxChildren + extra {
		wg.Go(func() {
			if r, err := http.Get(url); err == nil {
				r.Body.Close()
			}
		})
	}
	defer wg.Wait()
	var heavy *api.Status
	d.eventually("the shop heavy on its pool", 15*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if err := wantSiteGears(s, map[string]string{"default": "light", "wiki": "light"}, "auto"); err != nil {
			t.Fatalf("a neighbour moved for the shop's pool: %v", err)
		}
		if err := wantSiteGears(s, map[string]string{"shop": "heavy"}, "auto"); err != nil {
			return err
		}
		heavy = s
		return nil
	})
	shop, _ := heavy.Site("shop")
	if !strings.HasPrefix(shop.Reason, "site shop: phpfpm_busy_ratio 1.00 >= 0.90") || !strings.HasSuffix(shop.Reason, "(pool site)") {
		t.Errorf("shop heavy for %q, want its pool's busy children", shop.Reason)
	}
	for _, name := range []string{sensor.PHPFPMQueue, sensor.PHPFPMBusyRatio} {
		if v, ok := heavy.Sample.Signal(name); ok {
			t.Errorf("the server's %s = %v: the shop's pool is the shop's alone", name, v)
		}
	}
	if heavy.State != "heavy" || len(heavy.Targets) != 1 || !heavy.Targets[0].InSync {
		t.Errorf("status %s, targets %+v: want heavy (the heaviest site's), in sync", heavy.State, heavy.Targets)
	}
	wg.Wait()
	d.eventually("every site light once the requests are served", 60*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		return wantSiteGears(s, light, "auto")
	})
}

package system

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// The daemon reads a PHP-FPM pool behind Apache's event MPM: requests
// waiting for a child (the unix socket's accept queue, from the kernel)
// shift it up, and once they are served it comes back down.
func TestRunShiftsOnPHPFPMQueue(t *testing.T) {
	bin := lampstack.Need(t, "apache2", lampstack.ApachePrograms...)
	dir := t.TempDir()
	root := filepath.Join(dir, "site")
	lampstack.WriteFile(t, filepath.Join(root, "slow.php"), "<?php usleep((int)($_GET['ms'] ?? 0) * 1000); echo \"slept\\n\";\n")
	lampstack.Searchable(t, root)
	a := lampstack.Apache{Dir: filepath.Join(dir, "apache"), Root: root, Port: lampstack.FreePort(t), Stack: lampstack.FPM, Probe: "/slow.php"}
	lampstack.StartApache(t, a, bin)

	d := startDaemon(t, func(cfg *config.Config) {
		cfg.Backend = profiles.BackendAt("127.0.0.1", a.Port)
		cfg.Sensor.PHPFPM = config.Default().Sensor.PHPFPM
		cfg.Sensor.PHPFPM.Socket, cfg.Sensor.PHPFPM.Listen = a.FPMStatusSocket(), a.FPMSocket()
		cfg.Sensor.PHPFPM.Path = "/fpm-status"
		cfg.Sensor.PHPFPM.Timeout = timefmt.Duration(time.Second)
		cfg.States.Moderate.Enter["phpfpm_queue"] = 1
		cfg.States.Moderate.Stay["phpfpm_queue"] = 1
	})

	// More slow requests than children: the rest wait in the queue.
	const extra = 4
	var wg sync.WaitGroup
	url := fmt.Sprintf("http://127.0.0.1:%d/slow.php?ms=3000", a.Port)
	for range lampstack.FPMMaxChildren + extra {
		wg.Go(func() {
			if r, err := http.Get(url); err == nil {
				r.Body.Close()
			}
		})
	}
	defer wg.Wait()
	d.eventually("moderate on the queue", 10*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.State != "moderate" || !strings.Contains(s.Reason, "phpfpm_queue") {
			return fmt.Errorf("state %s (%s)", s.State, s.Reason)
		}
		if q := s.Sample.Signals["phpfpm_queue"]; q == nil || *q < 1 {
			return fmt.Errorf("phpfpm_queue %v", q)
		}
		return nil
	})
	wg.Wait()
	d.eventually("light once the requests are served", 30*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		return inSync(s, "light")
	})
}

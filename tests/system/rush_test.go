package system

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// TestRefusalsShiftAtOnce: the daemon before a real Varnish whose backend
// holds two connections, polling once a minute. Visitors ask for more
// pages at once than the backend holds; Varnish turns the rest away, the
// daemon reads the refusals in Varnish's log and shifts to heavy before
// its next poll could have (backend_busy's default rules).
func TestRefusalsShiftAtOnce(t *testing.T) {
	testenv.Need(t, "varnishlog", "varnish")
	// Pages take two seconds.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Second)
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(slow.Close)
	host, port, _ := net.SplitHostPort(slow.Listener.Addr().String())
	p, _ := strconv.Atoi(port)

	const poll = time.Minute
	v := varnishtest.Start(t, varnishtest.Config{})
	launched := time.Now()
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Varnish.Targets[0].Name = v.WorkDir // its log and counters
		cfg.Backend = profiles.BackendAt(host, p)
		cfg.Backend.MaxConnections = 2
		cfg.PollInterval = timefmt.Duration(poll)
		cfg.FastWindow = 0 // backend_busy over the poll: refusals a second over a minute
		cfg.States.Moderate.Enter[sensor.BackendBusy], cfg.States.Moderate.Stay[sensor.BackendBusy] = 0.5, 0.1
		cfg.States.Heavy.Enter[sensor.BackendBusy], cfg.States.Heavy.Stay[sensor.BackendBusy] = 2, 0.5
	})
	// Waves of 200 visitors, each asking for a page of its own at once:
	// the backend takes 2, Varnish turns the rest away (3.3 a second over
	// the minute's window, heavy's 2). The first wave may come before the
	// daemon's log reader attached.
	client := &http.Client{Timeout: 30 * time.Second}
	var refused atomic.Int64
	wave := 0
	d.eventually("heavy on the refusals", 40*time.Second, func() error {
		wave++
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				resp, err := client.Get(v.URL(fmt.Sprintf("/page-%d-%d", wave, i)))
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.State != "heavy" {
			return fmt.Errorf("state %s (%s) after %d refusals", s.State, s.Reason, refused.Load())
		}
		if !strings.Contains(s.Reason, "backend_busy") || !strings.Contains(s.Reason, "at once") {
			return fmt.Errorf("heavy, reason %q: want backend_busy's, at once", s.Reason)
		}
		return nil
	})
	if took := time.Since(launched); took >= poll {
		t.Fatalf("heavy %s after the daemon started: its second poll could have done it", took.Round(time.Second))
	}
	if refused.Load() == 0 {
		t.Error("no visitor got a 503: the backend turned nothing away")
	}
}

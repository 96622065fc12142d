package system

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// TestOverBudgetInStatus: the daemon before a real Varnish with a named
// target (whose log it reads) and a small profiles.client_budget, in
// heavy: a client over its budget gets 429s, and status counts them in
// over_budget and names the client in over_budget_clients; a client
// within its budget is not named.
func TestOverBudgetInStatus(t *testing.T) {
	testenv.Need(t, "varnishlog", "varnish")
	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Varnish.Targets[0].Name = v.WorkDir
		cfg.Profiles.ClientBudget = profiles.Budget{Rate: 1, Burst: 5}
	})
	if _, errOut, code := d.gs("force", "heavy"); code != exitOK {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}
	// Not loopback's 127.0.0.1, one of profiles.trusted_proxies: the
	// peer's address is the client's.
	const over, within = "127.0.0.2", "127.0.0.3"
	from := func(ip string) *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
		}}
	}
	get := func(c *http.Client, path string) int {
		t.Helper()
		resp, err := c.Get(v.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(from(within), "/within"); code != http.StatusOK {
		t.Fatalf("a client within its budget: %d", code)
	}
	// The daemon's reader of the Varnish log may attach after the first
	// refusals: the client asks for pages it has not seen (misses, each
	// taken from its budget) until status counts it.
	c := from(over)
	refused, i := 0, 0
	d.eventually("the client over its budget in status", 60*time.Second, func() error {
		for range 20 {
			i++
			if get(c, fmt.Sprintf("/?s=%d", i)) == http.StatusTooManyRequests {
				refused++
			}
		}
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.OverBudget == 0 || !slices.Contains(s.OverBudgetClients, over) {
			return fmt.Errorf("over_budget %d, over_budget_clients %q after %d refusals of %s", s.OverBudget, s.OverBudgetClients, refused, over)
		}
		if slices.Contains(s.OverBudgetClients, within) || s.OverBudget > refused {
			return fmt.Errorf("over_budget %d, over_budget_clients %q, but %s was refused %d times and %s never", s.OverBudget, s.OverBudgetClients, over, refused, within)
		}
		return nil
	})
}

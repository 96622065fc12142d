package system

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// TestFrontDoorInStatus: the daemon reads how each visitor was known from
// its Varnish's log: requests from a trusted peer that told nothing of
// its visitor (loopback without X-Forwarded-For, as behind a terminator
// that tells nothing) count as unidentified, the others as direct or
// forwarded; when most of a busy minute is unidentified, check warns and
// names the ways out.
func TestFrontDoorInStatus(t *testing.T) {
	testenv.Need(t, "varnishlog", "varnish")
	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Varnish.Targets[0].Name = v.WorkDir
	})
	from := func(ip string) *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
		}}
	}
	get := func(c *http.Client, path string, xff string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, v.URL(path), nil)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	d.eventually("front_door read from the Varnish log", 30*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.FrontDoor == nil {
			return fmt.Errorf("front_door null")
		}
		return nil
	})
	if out, _, code := d.gs("check"); code != 0 {
		t.Errorf("check before any traffic: exit %d %q, want OK", code, out)
	}
	local, visitor := from("127.0.0.1"), from("127.0.0.2")
	for i := range 80 {
		get(local, fmt.Sprintf("/door/%d", i), "")
	}
	for i := range 5 {
		get(visitor, fmt.Sprintf("/door/direct/%d", i), "")
		get(local, fmt.Sprintf("/door/forwarded/%d", i), "192.0.2.77")
	}
	d.eventually("the requests counted by door", 30*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if f := s.FrontDoor; f == nil || f.Unidentified < 80 || f.Direct < 5 || f.Forwarded < 5 {
			return fmt.Errorf("front_door %+v, want 80 unidentified, 5 direct, 5 forwarded", f)
		}
		return nil
	})
	out, _, code := d.gs("check")
	if code != 1 || !strings.Contains(out, "unidentified") || !strings.Contains(out, "PROXY protocol") ||
		!strings.Contains(out, "X-Forwarded-For") || !strings.Contains(out, "purge_token_file") {
		t.Errorf("check: exit %d %q, want WARNING naming PROXY protocol, X-Forwarded-For and purge_token_file", code, out)
	}
}

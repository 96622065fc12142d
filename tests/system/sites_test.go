package system

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
)

// sitesConfig gives the daemon three sites: shop and wiki beside the
// default one.
func sitesConfig(cfg *config.Config) {
	cfg.Profiles.ExposeHeaders = true
	cfg.Sites = []config.Site{
		{Name: "shop", Hosts: []string{"shop.example", "www.shop.example"}},
		{Name: "wiki", Hosts: []string{"*.wiki.example"}},
	}
}

// gearOf asks the daemon's Varnish for / as host and returns the gear
// that answered.
func gearOf(t *testing.T, d *runningDaemon, host string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.v.URL("/"), nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("X-Gearshift-Profile")
}

// The daemon with sites, as an operator drives it: each site's gear in
// `gearshift sites` and in Varnish, one site forced and released, an
// unknown site refused, a reload that removes a site.
func TestSitesDaemon(t *testing.T) {
	d := launchDaemon(t, sitesConfig, "NOTIFY_SOCKET=")
	d.eventually("the router active, every site in sync", 90*time.Second, func() error {
		s, err := d.status()
		switch {
		case err != nil:
			return err
		case len(s.Targets) != 1 || !s.Targets[0].InSync || !strings.HasPrefix(s.Targets[0].ActiveVCL, "gearshift-router-"):
			return fmt.Errorf("targets %+v", s.Targets)
		}
		return nil
	})
	sites := func() map[string]api.SiteStatus {
		t.Helper()
		out, stderr, code := d.gs("sites", "--json")
		if code != 0 {
			t.Fatalf("sites --json: exit %d: %s", code, stderr)
		}
		var doc struct{ Sites []api.SiteStatus }
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("sites --json: %v\n%s", err, out)
		}
		by := map[string]api.SiteStatus{}
		for _, s := range doc.Sites {
			by[s.Name] = s
		}
		return by
	}
	if s := sites(); len(s) != 3 || s["default"].Gear != "light" || s["shop"].Gear != "light" || s["wiki"].Gear != "light" {
		t.Fatalf("sites at start: %+v", s)
	}

	if _, stderr, code := d.gs("force", "heavy", "--site", "shop"); code != 0 {
		t.Fatalf("force heavy --site shop: exit %d: %s", code, stderr)
	}
	s := sites()
	if s["shop"].Gear != "heavy" || s["shop"].Mode != "forced" || s["wiki"].Gear != "light" || s["default"].Gear != "light" {
		t.Errorf("sites after forcing shop: %+v", s)
	}
	for host, want := range map[string]string{"www.shop.example": "heavy", "a.wiki.example": "light", "other.example": "light"} {
		if got := gearOf(t, d, host); got != want {
			t.Errorf("Host %s answered by %q, want %q", host, got, want)
		}
	}
	out, _, code := d.gs("status", "--site", "shop", "--json")
	var shop api.SiteStatus
	if code != 0 || json.Unmarshal([]byte(out), &shop) != nil || shop.Gear != "heavy" {
		t.Errorf("status --site shop --json: exit %d:\n%s", code, out)
	}
	if st, err := d.status(); err != nil || st.State != "heavy" || !st.Targets[0].InSync {
		t.Errorf("status after forcing shop: %+v %v, want heavy (the heaviest site), in sync", st, err)
	}
	if _, stderr, code := d.gs("force", "heavy", "--site", "nosuch"); code != 1 || !strings.Contains(stderr, "nosuch") {
		t.Errorf("force --site nosuch: exit %d (%s), want 1 naming the site", code, stderr)
	}
	if _, stderr, code := d.gs("auto", "--site", "shop"); code != 0 {
		t.Fatalf("auto --site shop: exit %d: %s", code, stderr)
	}
	d.eventually("shop back in light", 30*time.Second, func() error {
		if g := gearOf(t, d, "shop.example"); g != "light" {
			return fmt.Errorf("shop answered by %s", g)
		}
		return nil
	})

	// A reload that removes wiki: its hosts fall to default.
	cfg := *d.cfg
	cfg.Sites = cfg.Sites[:1]
	b, err := yaml.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.configPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := d.gs("reload"); code != 0 {
		t.Fatalf("reload: exit %d: %s", code, stderr)
	}
	d.eventually("two sites after the reload", 30*time.Second, func() error {
		if s := sites(); len(s) != 2 {
			return fmt.Errorf("sites %v", s)
		}
		return nil
	})
	if got := gearOf(t, d, "a.wiki.example"); got != "light" {
		t.Errorf("a removed site's host answered by %q", got)
	}
}

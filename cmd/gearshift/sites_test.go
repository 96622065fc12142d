package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

// sitesDaemon is a daemon with the sites default, shop and wiki, behind
// the real control socket handler; it records the site of each force and
// auto.
type sitesDaemon struct {
	forced []string // "site=gear" of each force, site "" for every site
	autos  []string // the site of each auto
}

var sitesDaemonSites = []string{"default", "shop", "wiki"}

func (d *sitesDaemon) Status() api.Status {
	since := time.Now().Add(-5 * time.Minute)
	s := api.Status{Version: "0.5.0", State: "heavy", Mode: "auto", Since: since, Reason: "site shop: 71 % of backend requests"}
	share := func(v float64) *float64 { return &v }
	for i, name := range sitesDaemonSites {
		site := api.SiteStatus{Name: name, Hosts: []string{}, Gear: "light", Mode: "auto", Since: since,
			Reason: "starting in light", BackendRPS: share(float64(i)), BackendShare: share(0.1 * float64(i)), MaxConnections: 30}
		if name == "shop" {
			site.Hosts, site.Gear, site.Reason = []string{"shop.example.com"}, "heavy", s.Reason
		}
		if name == "wiki" {
			site.Hosts, site.BackendRPS, site.BackendShare = []string{"wiki.example.org"}, nil, nil
		}
		s.Sites = append(s.Sites, site)
	}
	return s
}

func (d *sitesDaemon) Force(_ context.Context, site string, g state.Gear, _ time.Time) (api.Status, error) {
	if site != "" && !slices.Contains(sitesDaemonSites, site) {
		return api.Status{}, &api.UnknownSiteError{Site: site}
	}
	d.forced = append(d.forced, site+"="+g.String())
	s := d.Status()
	for i := range s.Sites {
		if site == "" || s.Sites[i].Name == site {
			s.Sites[i].Gear, s.Sites[i].Mode = g.String(), "forced"
		}
	}
	return s, nil
}

func (d *sitesDaemon) Auto(_ context.Context, site string) (api.Status, error) {
	if site != "" && !slices.Contains(sitesDaemonSites, site) {
		return api.Status{}, &api.UnknownSiteError{Site: site}
	}
	d.autos = append(d.autos, site)
	return d.Status(), nil
}

func (d *sitesDaemon) Reload(context.Context) (api.Status, error) { return d.Status(), nil }

// startSitesDaemon serves d on a control socket and returns a config that
// points at it.
func startSitesDaemon(t *testing.T, d *sitesDaemon) (config string) {
	t.Helper()
	path, dir := configtest.File(t, "control: { socket: $DIR/gearshift.sock }\n")
	ln, err := net.Listen("unix", filepath.Join(dir, "gearshift.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.NewHandler(d, nil)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

func TestSitesCommand(t *testing.T) {
	cfg := startSitesDaemon(t, &sitesDaemon{})
	code, stdout, stderr := runMain(t, "sites", "--config", cfg)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || stderr != "" || len(lines) != 4 || !strings.HasPrefix(lines[0], "SITE ") {
		t.Fatalf("sites: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	for i, want := range [][]string{
		{"default", "light", "auto", "(5m00s ago)", "0%", "starting in light"},
		{"shop", "heavy", "auto", "10%", "site shop: 71 % of backend requests"},
		{"wiki", "light", "auto", " - ", "starting in light"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %q lacks %q", lines[i+1], w)
			}
		}
	}

	code, stdout, stderr = runMain(t, "sites", "--json", "--config", cfg)
	var body map[string][]map[string]any
	if err := json.Unmarshal([]byte(stdout), &body); code != 0 || err != nil || len(body) != 1 || len(body["sites"]) != 3 {
		t.Fatalf("sites --json: exit %d, %v, stderr %q, stdout:\n%s", code, err, stderr, stdout)
	}
	if shop := body["sites"][1]; shop["name"] != "shop" || shop["gear"] != "heavy" || shop["backend_share"] != 0.1 {
		t.Errorf("sites --json: shop is %v", shop)
	}
	if wiki := body["sites"][2]; wiki["backend_share"] != nil {
		t.Errorf("sites --json: wiki's unknown share is %v, want null", wiki["backend_share"])
	}
}

func TestStatusOfASite(t *testing.T) {
	cfg := startSitesDaemon(t, &sitesDaemon{})
	code, stdout, stderr := runMain(t, "status", "--site", "shop", "--json", "--config", cfg)
	var site map[string]any
	if err := json.Unmarshal([]byte(stdout), &site); code != 0 || err != nil || site["name"] != "shop" || site["gear"] != "heavy" {
		t.Fatalf("status --site shop --json: exit %d, %v, stderr %q, stdout:\n%s", code, err, stderr, stdout)
	}
	if _, ok := site["targets"]; ok {
		t.Errorf("status --site --json printed the whole status:\n%s", stdout)
	}

	code, stdout, stderr = runMain(t, "status", "--site", "shop", "--config", cfg)
	if code != 0 || !strings.HasPrefix(stdout, "site     shop (shop.example.com)\ngear     HEAVY   auto\n") {
		t.Errorf("status --site shop: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}

	// The whole status has a row per site.
	code, stdout, _ = runMain(t, "status", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "\nsites ") || !strings.Contains(stdout, " wiki ") {
		t.Errorf("status: exit %d, no sites block:\n%s", code, stdout)
	}
}

// A site the daemon does not have is exit 1 and the daemon's one
// sentence, whatever the command.
func TestUnknownSiteExitsOne(t *testing.T) {
	d := &sitesDaemon{}
	cfg := startSitesDaemon(t, d)
	for _, args := range [][]string{
		{"status", "--site", "nosuch"},
		{"status", "--site", "nosuch", "--json"},
		{"force", "heavy", "--site", "nosuch"},
		{"auto", "--site", "nosuch"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runMain(t, append(args, "--config", cfg)...)
			if want := "gearshift: no site \"nosuch\" in the config (gearshift sites lists them).\n"; code != 1 || stdout != "" || stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
			}
		})
	}
	if len(d.forced) != 0 || len(d.autos) != 0 {
		t.Errorf("forced %v, autos %v", d.forced, d.autos)
	}
}

func TestForceAutoOfASite(t *testing.T) {
	d := &sitesDaemon{}
	cfg := startSitesDaemon(t, d)
	code, stdout, stderr := runMain(t, "force", "moderate", "--site", "shop", "--config", cfg)
	if code != 0 || !strings.HasPrefix(stdout, "site shop: gear moderate, forced until `gearshift auto --site shop`\n") {
		t.Errorf("force --site shop: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	code, stdout, stderr = runMain(t, "auto", "--site", "shop", "--config", cfg)
	if code != 0 || !strings.HasPrefix(stdout, "site shop: gear heavy, auto: site shop: 71 % of backend requests\n") {
		t.Errorf("auto --site shop: exit %d, stderr %q, stdout %q", code, stderr, stdout)
	}
	if code, _, stderr = runMain(t, "force", "light", "--config", cfg); code != 0 {
		t.Errorf("force light: exit %d, %s", code, stderr)
	}
	if code, _, stderr = runMain(t, "auto", "--config", cfg); code != 0 {
		t.Errorf("auto: exit %d, %s", code, stderr)
	}
	if want := []string{"shop=moderate", "=light"}; !slices.Equal(d.forced, want) {
		t.Errorf("forced %q, want %q", d.forced, want)
	}
	if want := []string{"shop", ""}; !slices.Equal(d.autos, want) {
		t.Errorf("autos %q, want %q (every pin without --site)", d.autos, want)
	}
}

func TestSitesHelp(t *testing.T) {
	code, stdout, stderr := runMain(t, "sites", "--help")
	if code != 0 || stderr != "" {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	golden.Check(t, "help/sites.golden", []byte(stdout))
	for _, cmd := range []string{"force", "auto", "status", "purge"} {
		if _, stdout, _ := runMain(t, cmd, "--help"); !strings.Contains(stdout, "--site name ") {
			t.Errorf("%s --help has no --site name:\n%s", cmd, stdout)
		}
	}
}

// A 404 of the daemon (a site it does not have) is a runtime failure with
// the daemon's message as it is.
func TestClientFailureUnknownSite(t *testing.T) {
	msg := (&api.UnknownSiteError{Site: "x"}).Error()
	code, err := clientFailure(&api.APIError{StatusCode: http.StatusNotFound, Message: msg})
	if code != exitFailure || err == nil || err.Error() != msg {
		t.Errorf("clientFailure(404) = %d, %v; want 1 and %q", code, err, msg)
	}
	if errors.Is(err, api.ErrUnreachable) {
		t.Error("a 404 reads as an unreachable daemon")
	}
}

package varnish

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// Tests in this file run label mode against a real varnishd whose active
// VCL is the site's own, built on the shipped snippet, and reloaded with
// Debian's own varnishreload.

// labelSite is what a label-mode test drives: an origin the profiles
// fetch from and the site's VCL, which hands /gs/ to vcl(gearshift).
type labelSite struct {
	origin  *httptest.Server
	siteVCL string // path of the site's VCL file
}

func newLabelSite(t *testing.T) *labelSite {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, "origin "+r.URL.Path)
	}))
	t.Cleanup(origin.Close)
	snippet, err := filepath.Abs(filepath.Join("..", "..", "scripts", "varnish", "gearshift-label.vcl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := searchableDir(t)
	site := filepath.Join(dir, "default.vcl")
	// The site keeps what is its own (here: /own) and hands the rest over.
	src := "vcl 4.1;\ninclude \"" + snippet + "\";\nbackend default none;\n" +
		"sub vcl_recv {\n\tif (req.url == \"/own\") { return (synth(204)); }\n\tcall gearshift_recv;\n}\n"
	if err := os.WriteFile(site, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return &labelSite{origin: origin, siteVCL: site}
}

// configure puts cfg in label mode with the origin as backend.
func (s *labelSite) configure(cfg *config.Config) {
	cfg.Varnish.Mode = config.ModeLabel
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(s.origin.URL, "http://"))
	cfg.Backend.Host = host
	cfg.Backend.Port, _ = strconv.Atoi(port)
}

// searchableDir is a temp dir that Varnish's unprivileged VCL compiler
// can read.
func searchableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// varnishreload runs Debian's varnishreload (what `systemctl reload
// varnish` runs) against r's varnishd: vcl.load of the file, vcl.use.
func (r *rig) varnishreload(t testing.TB, file string) {
	t.Helper()
	const script = "/usr/share/varnish/varnishreload"
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("%s missing: it comes with the varnish package (scripts/install-deps.sh)", script)
	}
	out, err := exec.Command(script, "-n", r.v.WorkDir, file).CombinedOutput()
	if err != nil {
		t.Fatalf("varnishreload: %v\n%s", err, out)
	}
}

// gear returns the gear whose profile served path through Varnish, or ""
// for the site's own answer.
func (r *rig) gear(t testing.TB, path string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(r.v.URL(path))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("X-Gearshift-Profile")
}

// wantLabel checks that the label points at st's profile, that Varnish
// serves the site's requests with it, and that the site's VCL is active.
func (r *rig) wantLabel(t testing.TB, st state.Gear) {
	t.Helper()
	want := r.set[st].Name
	out, err := r.v.Adm("vcl.list")
	if err != nil {
		t.Fatal(err)
	}
	if !labelledIn(out, want) {
		t.Fatalf("label %s not on %s:\n%s", profiles.Label, want, out)
	}
	if _, active := r.vcls(t); strings.HasPrefix(active, "gearshift-") {
		t.Fatalf("gearshift's profile %s is the active VCL: label mode must leave the site's active", active)
	}
	if got := r.gear(t, "/gs/page"); got != st.String() {
		t.Fatalf("request served by gear %q, want %s", got, st)
	}
	if ts := r.status(st); !ts.InSync || ts.LabelVCL != want {
		t.Fatalf("status = %+v, want %s in sync with the label on %s", ts, st, want)
	}
}

// labelledIn tells whether varnishadm's vcl.list shows the label on want.
func labelledIn(list, want string) bool {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && f[1] == "label" && f[4] == profiles.Label && f[5] == "->" && f[6] == want {
			return true
		}
	}
	return false
}

// sentUse reports whether any vcl.use went out.
func sentUse(cmds []string) bool {
	for _, c := range cmds {
		if strings.HasPrefix(c, "use ") {
			return true
		}
	}
	return false
}

func TestLabelModeFollowsTheGear(t *testing.T) {
	site := newLabelSite(t)
	r := newRig(t, site.configure)

	r.sync(t, state.Light)
	cmds := r.cmds.take()
	// The wanted gear first and the label on it, then the other two.
	if len(cmds) != 4 || cmds[0] != "inline "+r.set[state.Light].Name || cmds[1] != "label gearshift "+r.set[state.Light].Name {
		t.Fatalf("first contact sent %v, want light's vcl.inline, the label, then 2 vcl.inline", cmds)
	}
	// The label exists, but the boot VCL does not use it yet: said once.
	r.sync(t, state.Light)
	r.sync(t, state.Light)
	if n := r.logged("no VCL hands requests to the label: every gear serves the same"); n != 1 {
		t.Errorf("%d warnings about the unused label, want 1", n)
	}

	r.varnishreload(t, site.siteVCL) // the admin installs the snippet
	r.sync(t, state.Light)
	r.wantLabel(t, state.Light)
	if got := r.gear(t, "/own"); got != "" {
		t.Errorf("the site's own /own was served by gear %q", got)
	}

	for _, st := range []state.Gear{state.Heavy, state.Moderate, state.Light, state.Heavy} {
		r.sync(t, st)
		r.wantLabel(t, st)
		if ts := r.status(st); ts.LastSwitchMS <= 0 {
			t.Errorf("last_switch_ms = %v after a relabel", ts.LastSwitchMS)
		}
	}
	if cmds := r.cmds.take(); sentUse(cmds) {
		t.Errorf("label mode sent vcl.use: %v", cmds)
	}
	if n := r.logged("active VCL changed outside gearshift"); n != 0 {
		t.Errorf("label mode warned %d times about the site's own active VCL", n)
	}
}

func TestLabelModeKeepsRoutingThroughVarnishreload(t *testing.T) {
	site := newLabelSite(t)
	r := newRig(t, site.configure)
	r.sync(t, state.Light)
	r.varnishreload(t, site.siteVCL)
	r.sync(t, state.Moderate)
	r.wantLabel(t, state.Moderate)
	_, before := r.vcls(t)

	// systemctl reload varnish, twice: a new site VCL is active each time,
	// and it hands requests to the current gear with nothing sent.
	r.cmds.take()
	for i := 0; i < 2; i++ {
		r.varnishreload(t, site.siteVCL)
		r.sync(t, state.Moderate)
		r.wantLabel(t, state.Moderate)
	}
	if _, after := r.vcls(t); after == before || !strings.HasPrefix(after, "reload_") {
		t.Errorf("active VCL %q after varnishreload (was %q), want a new reload_*", after, before)
	}
	if cmds := r.cmds.take(); len(cmds) != 0 {
		t.Errorf("syncs after varnishreload sent %v, want nothing", cmds)
	}
	if ts := r.status(state.Moderate); ts.ForeignVCLAt != nil {
		t.Errorf("a varnishreload in label mode was reported foreign: %+v", ts)
	}

	// Someone moves the label: put back, said, and shown in status.
	if _, err := r.v.Adm("vcl.label", profiles.Label, r.set[state.Light].Name); err != nil {
		t.Fatal(err)
	}
	when := r.now
	r.sync(t, state.Moderate)
	r.wantLabel(t, state.Moderate)
	if n := r.logged("label changed outside gearshift"); n != 1 {
		t.Errorf("%d warnings about the moved label, want 1", n)
	}
	if at := r.status(state.Moderate).ForeignVCLAt; at == nil || !at.Equal(when) {
		t.Errorf("foreign_vcl_at = %v, want %v", at, when)
	}

	// New profiles (a reload) preloaded, then synced: relabelled, and the
	// old profiles discarded, but not one that another label still
	// points at.
	old := r.set
	if _, err := r.v.Adm("vcl.label", "mine", old[state.Heavy].Name); err != nil {
		t.Fatal(err)
	}
	r.cfg.Profiles.StaticTTL = timefmt.Duration(2 * time.Hour)
	next, err := profiles.Build(r.cfg.Site())
	if err != nil {
		t.Fatal(err)
	}
	if loaded, err := r.t.Preload(context.Background(), &next); err != nil || len(loaded) != 3 {
		t.Fatalf("preload loaded %v, %v; want the 3 new profiles", loaded, err)
	}
	r.set = next
	r.sync(t, state.Moderate)
	r.wantLabel(t, state.Moderate)
	names, _ := r.vcls(t)
	for _, st := range []state.Gear{state.Light, state.Moderate} {
		if names[old[st].Name] {
			t.Errorf("old profile %s not discarded", old[st].Name)
		}
	}
	if out, _ := r.v.Adm("vcl.list"); !names[old[state.Heavy].Name] || !strings.Contains(out, "mine") {
		t.Errorf("the old heavy profile, still labelled mine, was discarded:\n%s", out)
	}
	if r.logged("discard stale profile") != 0 {
		t.Errorf("gearshift tried to discard a labelled VCL: %v", r.logs.FilterMessage("discard stale profile").All())
	}
}

func TestLabelModeRecoversManagerRestart(t *testing.T) {
	site := newLabelSite(t)
	// What the admin runs once: profiles export, and varnishd started with
	// -f '' -I gearshift.cli, booting with the label on light.
	cfg := config.Default()
	cfg.History.Dir = "" // tests record nothing unless they say so
	site.configure(cfg)
	set, err := profiles.Build(cfg.Site())
	if err != nil {
		t.Fatal(err)
	}
	paths, err := profiles.ExportLabel(set, filepath.Join(searchableDir(t), "export"), state.Light, site.siteVCL)
	if err != nil {
		t.Fatal(err)
	}
	v := varnishtest.Start(t, varnishtest.Config{CLIFile: paths[len(paths)-1]})
	r := newRigOn(t, v, site.configure)

	r.sync(t, state.Light)
	r.wantLabel(t, state.Light)
	if cmds := r.cmds.take(); len(cmds) != 0 {
		t.Errorf("first contact with an exported boot sent %v, want nothing", cmds)
	}
	r.sync(t, state.Heavy)
	r.wantLabel(t, state.Heavy)

	// The manager restarts: -I labels light again; gearshift puts heavy back.
	r.v.Restart()
	r.sync(t, state.Heavy)
	r.wantLabel(t, state.Heavy)
	if n := r.logged("label changed outside gearshift"); n != 0 {
		t.Errorf("a manager restart was reported as a foreign relabel")
	}
	if n := r.logged("label not on the current gear after reconnecting (manager restarted?): labelling again"); n != 1 {
		t.Errorf("%d entries about relabelling after a restart, want 1", n)
	}
}

// Running says which gear the label is on, as a restarted daemon asks it
// before resuming that gear; the connection it asked on is kept, so the
// first sync dials nothing more and sends nothing.
func TestLabelModeRunningIsTheLabelledGear(t *testing.T) {
	site := newLabelSite(t)
	first := newRig(t, site.configure)
	first.sync(t, state.Light)
	first.varnishreload(t, site.siteVCL)
	first.sync(t, state.Heavy)
	first.wantLabel(t, state.Heavy)
	first.t.Close()

	again := newRigOn(t, first.v, site.configure)
	found, err := again.t.Running(context.Background())
	if err != nil || found.Gear != state.Heavy.String() {
		t.Fatalf("Running = %+v, %v; want heavy", found, err)
	}
	again.t.Keep(found)
	again.sync(t, state.Heavy)
	again.wantLabel(t, state.Heavy)
	if cmds := again.cmds.take(); len(cmds) != 0 {
		t.Errorf("syncing the gear found sent %v, want nothing", cmds)
	}
}

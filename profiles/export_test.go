package profiles

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

func TestExportFiles(t *testing.T) {
	set, err := Build(*defaultSite())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "with space", "gearshift")
	paths, err := Export(set, dir, state.Moderate)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 4 {
		t.Fatalf("Export wrote %v", paths)
	}
	for _, p := range set {
		b, err := os.ReadFile(filepath.Join(dir, p.Gear.String()+".vcl"))
		if err != nil || string(b) != p.VCL {
			t.Errorf("%s.vcl: %v, or not the profile's text", p.Gear, err)
		}
	}
	cli, err := os.ReadFile(filepath.Join(dir, CLIFile))
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, p := range set {
		want += "-vcl.load " + p.Name + " " + strings.ReplaceAll(filepath.Join(dir, p.Gear.String()+".vcl"), " ", `\x20`) + " warm\n"
	}
	want += "-vcl.use " + set[state.Moderate].Name + "\n"
	if string(cli) != want {
		t.Errorf("%s:\n%s\nwant:\n%s", CLIFile, cli, want)
	}
}

// TestExportBootsVarnish starts varnishd with the exported -I file next to
// a stock -f boot VCL, as a packaged unit does, and checks that gearshift's
// profile is active under its gearshift name before gearshift connects.
func TestExportBootsVarnish(t *testing.T) {
	o := newOrigin(t)
	set, err := Build(*testConfig(o))
	if err != nil {
		t.Fatal(err)
	}
	dir := searchableTempDir(t)
	// A space in the path: the CLI file quotes it as the admin client does.
	if _, err := Export(set, filepath.Join(dir, "ex port"), state.Heavy); err != nil {
		t.Fatal(err)
	}
	http, vcls := bootWithCLI(t, dir, filepath.Join(dir, "ex port", CLIFile), false)
	for _, p := range set {
		if _, ok := vcls[p.Name]; !ok {
			t.Errorf("%s not loaded; vcl.list: %+v", p.Name, vcls)
		}
	}
	if v := vcls[set[state.Heavy].Name]; !v.Active() {
		t.Errorf("%s is not the active VCL; vcl.list: %+v", set[state.Heavy].Name, vcls)
	}
	g := &gears{v: &varnishtest.Varnish{HTTPAddr: http}}
	g.do(t, req{path: "/exported"}).want(t, "MISS", "")
	if r := g.do(t, req{path: "/exported"}); r.header.Get("X-Gearshift-Profile") != "heavy" {
		t.Errorf("X-Gearshift-Profile = %q", r.header.Get("X-Gearshift-Profile"))
	}
}

// TestExportBrokenStillBoots: a broken or missing exported file does not
// keep Varnish from starting; it boots into its -f VCL.
func TestExportBrokenStillBoots(t *testing.T) {
	set, err := Build(*defaultSite())
	if err != nil {
		t.Fatal(err)
	}
	dir := searchableTempDir(t)
	if _, err := Export(set, filepath.Join(dir, "export"), state.Heavy); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "export", "heavy.vcl"), []byte("vcl 4.1; this is not VCL\n"), 0o644)
	os.Remove(filepath.Join(dir, "export", "light.vcl"))
	_, vcls := bootWithCLI(t, dir, filepath.Join(dir, "export", CLIFile), false)
	if v, ok := vcls["boot"]; !ok || !v.Active() {
		t.Errorf("boot VCL not active; vcl.list: %+v", vcls)
	}
	if _, ok := vcls[set[state.Moderate].Name]; !ok {
		t.Errorf("the intact moderate profile was not loaded; vcl.list: %+v", vcls)
	}
}

// TestExportLabelBootsVarnish boots varnishd the way label mode needs
// (-f ” -I gearshift.cli) with a site VCL that uses the shipped snippet:
// the site's VCL is active, the label points at the exported gear, and
// the site's requests are served by that gear's profile.
func TestExportLabelBootsVarnish(t *testing.T) {
	o := newOrigin(t)
	set, err := Build(*testConfig(o))
	if err != nil {
		t.Fatal(err)
	}
	dir := searchableTempDir(t)
	snippet, err := filepath.Abs(filepath.Join("..", "scripts", "varnish", "gearshift-label.vcl"))
	if err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(dir, "site.vcl")
	os.WriteFile(site, []byte("vcl 4.1;\ninclude \""+snippet+"\";\nbackend default none;\n"+
		"sub vcl_recv {\n\tif (req.url == \"/mine\") { return (synth(204)); }\n\tcall gearshift_recv;\n}\n"), 0o644)
	paths, err := ExportLabel(set, filepath.Join(dir, "export"), state.Moderate, site)
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := os.ReadFile(paths[len(paths)-1])
	want := ""
	for _, p := range set {
		want += "-vcl.load " + p.Name + " " + filepath.Join(dir, "export", p.Gear.String()+".vcl") + " warm\n"
	}
	want += "vcl.label gearshift " + set[state.Moderate].Name + "\nvcl.load boot " + site + "\nvcl.use boot\n"
	if string(cli) != want {
		t.Errorf("%s:\n%s\nwant:\n%s", CLIFile, cli, want)
	}

	http, vcls := bootWithCLI(t, dir, paths[len(paths)-1], true)
	if v := vcls["boot"]; !v.Active() {
		t.Errorf("the site's VCL is not active; vcl.list: %+v", vcls)
	}
	if l := vcls[Label]; !l.IsLabel() || l.LabelOf != set[state.Moderate].Name || l.LabelRefs != 1 {
		t.Errorf("label %s = %+v, want it on %s, used by the site's VCL", Label, l, set[state.Moderate].Name)
	}
	g := &gears{v: &varnishtest.Varnish{HTTPAddr: http}}
	if r := g.do(t, req{path: "/exported"}); r.header.Get("X-Gearshift-Profile") != "moderate" {
		t.Errorf("X-Gearshift-Profile = %q, want moderate", r.header.Get("X-Gearshift-Profile"))
	}
	if r := g.do(t, req{path: "/mine"}); r.status != 204 || r.header.Get("X-Gearshift-Profile") != "" {
		t.Errorf("/mine = %d %v, want the site's own 204", r.status, r.header)
	}
}

// bootWithCLI starts varnishd with a stock boot VCL and -I cli, waits for
// the CLI, and returns the HTTP address and the loaded VCLs by name. With
// noF, varnishd gets -f ” (label mode: cli loads the site's VCL).
func bootWithCLI(t *testing.T, dir, cli string, noF bool) (string, map[string]varnishadm.VCL) {
	t.Helper()
	bin := varnishtest.Binary(t)
	boot := filepath.Join(dir, "default.vcl")
	secret := filepath.Join(dir, "secret")
	os.WriteFile(boot, []byte(varnishtest.DefaultVCL), 0o644)
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	admin, http := testenv.FreeAddr(t), testenv.FreeAddr(t)
	if noF {
		boot = ""
	}
	cmd := exec.Command(bin, "-F", "-n", filepath.Join(dir, "n"), "-a", http, "-T", admin, "-S", secret,
		"-f", boot, "-I", cli, "-s", "malloc,16m")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	c, err := varnishadm.NewFromFile(admin, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("varnishd exited:\n%s", log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		list, err := c.VCLList(ctx)
		cancel()
		if err == nil && activeIn(list) {
			vcls := map[string]varnishadm.VCL{}
			for _, v := range list {
				vcls[v.Name] = v
			}
			return http, vcls
		}
		if time.Now().After(deadline) {
			t.Fatalf("varnishd with -I did not come up: %v\n%s", err, log.String())
		}
	}
}

func activeIn(list []varnishadm.VCL) bool {
	for _, v := range list {
		if v.Active() {
			return true
		}
	}
	return false
}

// TestExportSitesBootsVarnish: with sites, varnishd boots into the
// router, every site's label on its set's profile of the exported gear.
func TestExportSitesBootsVarnish(t *testing.T) {
	o := newOrigin(t)
	site := testConfig(o)
	site.Routes = []Route{{Site: DefaultSite}, {Site: "shop", Hosts: []string{"shop.example"}}}
	set, err := Build(*site)
	if err != nil {
		t.Fatal(err)
	}
	own := *site
	own.Options.NeverCache = append(slices.Clone(own.Options.NeverCache), "^/shop-only")
	shopSet, err := Build(own)
	if err != nil {
		t.Fatal(err)
	}
	router, err := Router(site.Routes)
	if err != nil {
		t.Fatal(err)
	}
	dir := searchableTempDir(t)
	x := SitesExport{Sets: []*Set{&set, &shopSet}, Sites: []string{DefaultSite, "shop"}, SetOf: []int{0, 1}, Router: router}
	if _, err := ExportSites(x, filepath.Join(dir, "export"), state.Heavy, ""); err != nil {
		t.Fatal(err)
	}
	addr, vcls := bootWithCLI(t, dir, filepath.Join(dir, "export", CLIFile), false)
	if v := vcls[router.Name]; !v.Active() {
		t.Errorf("the router is not the active VCL; vcl.list: %+v", vcls)
	}
	for name, want := range map[string]string{SiteLabel(DefaultSite): set[state.Heavy].Name, SiteLabel("shop"): shopSet[state.Heavy].Name} {
		if got := vcls[name].LabelOf; got != want {
			t.Errorf("label %s -> %q, want %q", name, got, want)
		}
	}
	g := &gears{v: &varnishtest.Varnish{HTTPAddr: addr}}
	if r := g.do(t, req{path: "/exported", host: "shop.example"}); r.header.Get("X-Gearshift-Profile") != "heavy" {
		t.Errorf("shop.example answered by %q, want heavy", r.header.Get("X-Gearshift-Profile"))
	}
	if _, err := ExportSites(SitesExport{Sets: []*Set{&set}, Sites: []string{"shop"}}, filepath.Join(dir, "bad"), state.Heavy, ""); err == nil {
		t.Error("ExportSites with a site of no set: no error")
	}

	// Label mode: the site's own VCL, active, hands each request to its
	// site's label through the exported snippet.
	x.Routes = site.Routes
	snippet := filepath.Join(dir, "label", SitesSnippetFile)
	siteFile := filepath.Join(dir, "site.vcl")
	os.WriteFile(siteFile, []byte("vcl 4.1;\ninclude \""+snippet+"\";\nbackend default none;\n"+
		"sub vcl_recv {\n\tif (req.url == \"/mine\") { return (synth(204)); }\n\tcall gearshift_recv;\n}\n"), 0o644)
	if _, err := ExportSites(x, filepath.Join(dir, "label"), state.Moderate, siteFile); err != nil {
		t.Fatal(err)
	}
	addr, vcls = bootWithCLI(t, filepath.Join(dir, "label"), filepath.Join(dir, "label", CLIFile), true)
	if v := vcls["boot"]; !v.Active() {
		t.Errorf("the site's VCL is not active; vcl.list: %+v", vcls)
	}
	g = &gears{v: &varnishtest.Varnish{HTTPAddr: addr}}
	for host, want := range map[string]string{"SHOP.example:80": "moderate", "other.example": "moderate"} {
		if r := g.do(t, req{path: "/label-exported", host: host}); r.header.Get("X-Gearshift-Profile") != want {
			t.Errorf("label mode, Host %s: answered by %q, want %s", host, r.header.Get("X-Gearshift-Profile"), want)
		}
	}
	// shop's own never_cache keeps its /shop-only out of the cache; the
	// default site's stores it: each Host reached its own site's profile.
	for host, want := range map[string]string{"shop.example": "", "other.example": "HIT"} {
		g.do(t, req{path: "/shop-only?cc=max-age%3D600", host: host})
		if r := g.do(t, req{path: "/shop-only?cc=max-age%3D600", host: host}); (r.header.Get("X-Cache") == "HIT") != (want == "HIT") {
			t.Errorf("label mode, Host %s, /shop-only seen twice: X-Cache %q, want HIT %v", host, r.header.Get("X-Cache"), want == "HIT")
		}
	}
	if l := vcls[SiteLabel("shop")]; l.LabelOf != shopSet[state.Moderate].Name || l.LabelRefs != 1 {
		t.Errorf("label of shop = %+v, want it on %s, used by the site's VCL", l, shopSet[state.Moderate].Name)
	}
	if r := g.do(t, req{path: "/mine"}); r.status != 204 {
		t.Errorf("/mine = %d, want the site's own 204", r.status)
	}
}

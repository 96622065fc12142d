package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

func TestProfilesListShowExport(t *testing.T) {
	const target = "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n"
	path, dir := configtest.File(t, target+"backend: { host: 127.0.0.1, port: 8099 }\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// What the offline commands print stands in for the daemon's guest
	// secret, made at its start.
	cfg.GuestSecret = profiles.RedactedGuestSecret
	set, err := profiles.Build(cfg.Site())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("list", func(t *testing.T) {
		code, out, errs := runMain(t, "--config", path, "profiles", "list")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !regexp.MustCompile(`^GEAR\s+NAME\s+SOURCE$`).MatchString(lines[0]) {
			t.Fatalf("list output:\n%s", out)
		}
		for i, p := range set {
			if f := strings.Fields(lines[i+1]); len(f) != 3 || f[0] != p.Gear.String() || f[1] != p.Name || f[2] != "built-in" {
				t.Errorf("line %q, want %s %s built-in", lines[i+1], p.Gear, p.Name)
			}
		}
	})

	t.Run("show", func(t *testing.T) {
		for _, s := range state.All {
			code, out, errs := runMain(t, "--config", path, "profiles", "show", s.String())
			if code != 0 || out != set[s].VCL {
				t.Errorf("show %s: exit %d, %s; output is not the rendered VCL", s, code, errs)
			}
		}
		if !strings.Contains(set[state.Heavy].VCL, `.port = "8099";`) {
			t.Error("the config's backend is not in the VCL")
		}
		if !strings.Contains(set[state.Heavy].VCL, `!= "`+profiles.RedactedGuestSecret+`"`) {
			t.Error("heavy does not show the guest secret's stand-in")
		}
	})

	t.Run("show away from the server", func(t *testing.T) {
		// The admin secret exists only on the server: rendering needs none,
		// talking to Varnish does.
		far, _ := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: /nonexistent/secret } ] }\n"+
			"backend: { host: 127.0.0.1, port: 8099 }\n")
		code, out, errs := runMain(t, "--config", far, "profiles", "show", "heavy")
		if code != 0 || out != set[state.Heavy].VCL {
			t.Errorf("show heavy without the secret: exit %d, %s", code, errs)
		}
		code, _, errs = runMain(t, "--config", far, "profiles", "check")
		if code != 2 || !strings.Contains(errs, "secret_file") {
			t.Errorf("check without the secret: exit %d, %q; want 2 naming secret_file", code, errs)
		}
	})

	t.Run("export", func(t *testing.T) {
		code, out, errs := runMain(t, "--config", path, "profiles", "export", filepath.Join(dir, "out"), "--use", "moderate")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		cli, err := os.ReadFile(filepath.Join(dir, "out", profiles.CLIFile))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(cli), "-vcl.use "+set[state.Moderate].Name+"\n") {
			t.Errorf("gearshift.cli:\n%s", cli)
		}
		if !strings.Contains(out, "-I "+filepath.Join(dir, "out", profiles.CLIFile)) {
			t.Errorf("export output does not say how to use the -I file:\n%s", out)
		}
	})

	t.Run("export in label mode", func(t *testing.T) {
		p, d := configtest.File(t, "varnish: { mode: label, targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n"+
			"backend: { host: 127.0.0.1, port: 8099 }\n")
		site := filepath.Join(d, "default.vcl")
		code, out, errs := runMain(t, "--config", p, "profiles", "export", filepath.Join(d, "out"), "--use", "heavy", "--site-vcl", site)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		cli, err := os.ReadFile(filepath.Join(d, "out", profiles.CLIFile))
		if err != nil {
			t.Fatal(err)
		}
		if want := "vcl.label gearshift " + set[state.Heavy].Name + "\nvcl.load boot " + site + "\nvcl.use boot\n"; !strings.HasSuffix(string(cli), want) {
			t.Errorf("gearshift.cli:\n%s\nwant it to end with:\n%s", cli, want)
		}
		if !strings.Contains(out, "-f '' -I "+filepath.Join(d, "out", profiles.CLIFile)) {
			t.Errorf("export output does not say how to start varnishd in label mode:\n%s", out)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		doc  string
		code int
		msg  string
	}{
		{"show an unknown gear", []string{"profiles", "show", "medium"}, target, 2, `unknown state "medium"`},
		{"show without a gear", []string{"profiles", "show"}, target, 2, "accepts 1 arg"},
		{"export --use an unknown gear", []string{"profiles", "export", "x", "--use", "turbo"}, target, 2, "--use: unknown state"},
		{"list with a missing vcl_file", []string{"profiles", "list"}, target + "profiles: { heavy: { vcl_file: $DIR/nope.vcl } }\n", 2, "profiles.heavy.vcl_file"},
		{"list with a bad cookie glob", []string{"profiles", "list"}, target + "profiles: { session_cookies: [ \"[0-9\" ] }\n", 2, "profiles.session_cookies[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := configtest.File(t, tc.doc)
			code, _, errs := runMain(t, append([]string{"--config", p}, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errs, tc.code, tc.msg)
			}
			if strings.Count(strings.TrimSpace(errs), "\n") != 0 && code != 2 {
				t.Errorf("stderr is more than one line: %q", errs)
			}
		})
	}
}

func TestProfilesCheck(t *testing.T) {
	v := varnishtest.Start(t, varnishtest.Config{})
	vclList := func() string {
		t.Helper()
		out, err := v.Adm("vcl.list")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	path, cfg := configtest.ForVarnish(t, v, nil)
	code, out, errs := runMain(t, "--config", path, "profiles", "check")
	if code != 0 {
		t.Fatalf("check: exit %d\n%s%s", code, out, errs)
	}
	cfg.GuestSecret = profiles.RedactedGuestSecret
	set, _ := profiles.Build(cfg.Site())
	for _, p := range set {
		if !strings.Contains(out, p.Name+" on "+v.AdminAddr+": OK") {
			t.Errorf("check output lacks %s OK:\n%s", p.Name, out)
		}
	}
	if l := vclList(); strings.Contains(l, "gearshift-") {
		t.Errorf("check left VCLs behind:\n%s", l)
	}

	bad := filepath.Join(t.TempDir(), "bad.vcl")
	os.WriteFile(bad, []byte("vcl 4.1;\nbackend default none;\nsub vcl_recv { set req.http.X = no_such_symbol; }\n"), 0o644)
	path, _ = configtest.ForVarnish(t, v, func(c *config.Config) { c.Profiles.Moderate.VCLFile = bad })
	code, out, errs = runMain(t, "--config", path, "profiles", "check")
	if code != 1 {
		t.Errorf("check with a broken profile: exit %d, want 1\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "no_such_symbol") || !strings.Contains(errs, "1 of 3 profile checks failed") {
		t.Errorf("stderr lacks the compiler's message or the summary:\n%s", errs)
	}
	if !strings.Contains(out, "moderate") || !strings.Contains(out, "FAILED") || strings.Count(out, ": OK") != 2 {
		t.Errorf("check output:\n%s", out)
	}
	if l := vclList(); strings.Contains(l, "gearshift-") {
		t.Errorf("check left VCLs behind:\n%s", l)
	}

	path, _ = configtest.ForVarnish(t, v, func(c *config.Config) { c.Varnish.Targets[0].Admin = testenv.FreeAddr(t) })
	if code, _, errs = runMain(t, "--config", path, "profiles", "check"); code != 1 {
		t.Errorf("check against a closed port: exit %d, want 1: %s", code, errs)
	}
}

// TestProfilesCheckWithoutModules: on a Varnish without varnish-modules,
// check compiles each profile's plain twin, which the daemon loads there,
// and says so.
func TestProfilesCheckWithoutModules(t *testing.T) {
	v := varnishtest.Start(t, varnishtest.Config{Params: []string{varnishtest.WithoutModules(t)}})
	path, cfg := configtest.ForVarnish(t, v, nil)
	code, out, errs := runMain(t, "--config", path, "profiles", "check")
	if code != 0 {
		t.Fatalf("check: exit %d\n%s%s", code, out, errs)
	}
	cfg.GuestSecret = profiles.RedactedGuestSecret
	set, _ := profiles.Build(cfg.Site())
	for _, p := range set {
		plain, _ := p.Plain()
		if !strings.Contains(out, plain.Name+" on "+v.AdminAddr+": OK without varnish-modules") {
			t.Errorf("check output lacks %s's plain twin %s OK without varnish-modules:\n%s", p.Gear, plain.Name, out)
		}
	}
}

// With sites, profiles export writes the router and every site's label;
// in label mode it refuses, saying what to do instead.
func TestProfilesExportSites(t *testing.T) {
	const target = "targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ]"
	const rest = "backend: { host: 127.0.0.1, port: 8099 }\n" +
		"sites: [ { name: shop, hosts: [shop.example], profiles: { never_cache: ['^/cart'] } } ]\n"
	path, dir := configtest.File(t, "varnish: { "+target+" }\n"+rest)
	out := filepath.Join(dir, "export")
	code, stdout, errs := runMain(t, "--config", path, "profiles", "export", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	cli, err := os.ReadFile(filepath.Join(out, profiles.CLIFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-vcl.label " + profiles.SiteLabel("shop") + " gearshift-", "-vcl.label " + profiles.SiteLabel(profiles.DefaultSite) + " gearshift-", "-vcl.use " + profiles.RouterPrefix} {
		if !strings.Contains(string(cli), want) {
			t.Errorf("%s lacks %q:\n%s", profiles.CLIFile, want, cli)
		}
	}
	if strings.Count(string(cli), "-vcl.load ") != 7 || !strings.Contains(stdout, "router") {
		t.Errorf("want two sets of three profiles and the router loaded:\n%s\n%s", cli, stdout)
	}

	labelPath, _ := configtest.File(t, "varnish: { mode: label, "+target+" }\n"+rest)
	labelOut := filepath.Join(dir, "label")
	code, stdout, errs = runMain(t, "--config", labelPath, "profiles", "export", labelOut)
	if code != 0 || !strings.Contains(stdout, profiles.SitesSnippetFile) {
		t.Fatalf("label mode with sites: exit %d: %s%s", code, stdout, errs)
	}
	if snippet, err := os.ReadFile(filepath.Join(labelOut, profiles.SitesSnippetFile)); err != nil || !strings.Contains(string(snippet), "return (vcl("+profiles.SiteLabel("shop")+"))") {
		t.Errorf("the snippet does not hand shop's requests to its label: %v\n%s", err, snippet)
	}
}

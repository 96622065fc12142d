package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
)

func TestConfigCommands(t *testing.T) {
	const target = "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n"
	tests := []struct {
		name     string
		args     []string
		doc      string
		wantCode int
		golden   string // compared with stdout+stderr, $DIR for the temp dir
	}{
		{"check ok", []string{"config", "check"}, target + "states: { heavy: { enter: { load_per_cpu: 2 } } }\n", 0, "config/check-ok.golden"},
		{"check problems", []string{"config", "check"}, target + `poll_interval: 0s
states:
  heavy: { enter: { load_per_cpu: 0.6 }, stay: { load_per_cpu: 0.5 } }
hysteresis: { up_confirm: 0, down_windw: 2m }
on_exit: off
profiles: { purge_acl: [10.0.0.0/8, everyone] }
`, 2, "config/check-problems.golden"},
		{"check one problem", []string{"config", "check"}, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/absent } ] }\n", 2, "config/check-secret.golden"},
		{"show refuses a bad config", []string{"config", "show"}, target + "cpus: many\n", 2, "config/show-bad.golden"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, dir := configtest.File(t, tc.doc)
			code, stdout, stderr := runMain(t, append(tc.args, "--config", path)...)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, "not-to-be-printed") {
				t.Error("the admin secret was printed")
			}
			golden.Check(t, tc.golden, []byte(strings.ReplaceAll(stdout+stderr, dir, "$DIR")))
		})
	}
}

// config show prints the file over the defaults, and what it prints reads
// back as the same config.
func TestConfigShow(t *testing.T) {
	path, dir := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\nstates: { heavy: { enter: { load_per_cpu: 2 } } }\nhysteresis: { down_window: 5m }\n")
	code, stdout, stderr := runMain(t, "config", "show", "--config", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	header, body, _ := strings.Cut(stdout, "\n")
	if header != "# effective gearshift config: "+path {
		t.Errorf("header = %q", header)
	}
	for _, want := range []string{"\n  heavy:\n    enter:\n      load_per_cpu: 2\n    stay:\n", "down_window: 5m\n", "secret_file: " + dir + "/secret\n", "static_ttl: 1h\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("config show lacks %q:\n%s", want, body)
		}
	}
	again, _ := configtest.File(t, body)
	code, stdout2, stderr := runMain(t, "config", "show", "--config", again)
	if _, body2, _ := strings.Cut(stdout2, "\n"); code != 0 || body2 != body {
		t.Errorf("config show output does not read back as the same config (exit %d, %s):\n%s", code, stderr, body2)
	}
}

// config check reads sensor.phpfpm's status page once: a page that is
// not php-fpm's is a problem of the config, in one line naming the key;
// php-fpm not running is a warning, since the daemon rides it out.
func TestConfigCheckReachesPHPFPM(t *testing.T) {
	notFPM := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "<html><body>It works!</body></html>")
	}))
	defer notFPM.Close()
	const target = "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n"
	path, _ := configtest.File(t, target+"sensor: { phpfpm: { url: "+notFPM.URL+"/fpm-status } }\n")
	code, stdout, stderr := runMain(t, "config", "check", "--config", path)
	want := "gearshift: config " + path + ": sensor.phpfpm: " + notFPM.URL + "/fpm-status?json&full: not a PHP-FPM status page (not the JSON of ?json: it begins \"<html>"
	if code != 2 || stdout != "" || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line beginning %q", code, stdout, stderr, want)
	}

	gone := filepath.Join(t.TempDir(), "php8.2-fpm.sock")
	path, _ = configtest.File(t, target+"sensor: { phpfpm: { socket: "+gone+" } }\n")
	code, stdout, stderr = runMain(t, "config", "check", "--config", path)
	want = "gearshift: warning: sensor.phpfpm: read php-fpm status: no socket " + gone + " (is php-fpm running"
	if code != 0 || !strings.HasPrefix(stderr, want) || !strings.HasPrefix(stdout, "config OK") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, config OK and a warning beginning %q", code, stdout, stderr, want)
	}
}

func TestConfigCheckMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gearshift.yaml")
	code, _, stderr := runMain(t, "config", "check", "--config", missing)
	if code != 2 || !strings.Contains(stderr, "no such file") {
		t.Errorf("exit %d, stderr %q; want 2 and the missing file named", code, stderr)
	}
}

// uncommentRE matches a commented-out setting of the example config
// ("#poll_interval: 1s", "#  moderate:"), not its prose.
var uncommentRE = regexp.MustCompile(`(?m)^([ \t]*)#([ \t]*[a-z_]+:([ \t].*)?)$`)

// The example config installed to /etc says what the defaults are: as
// shipped, and with every commented setting uncommented, it is the defaults.
func TestExampleConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "gearshift.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("x\n"), 0o600)
	// The defaults as the daemon loads them: with the default target on
	// loopback, its counters' conditions (backend_busy) join the rules.
	def, err := config.Parse([]byte("varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: " + secret + " } ] }\n"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := def.YAML()
	for name, doc := range map[string]string{
		"as shipped":  string(b),
		"uncommented": uncommentRE.ReplaceAllString(string(b), "$1$2"),
	} {
		cfg, err := config.Parse([]byte(strings.ReplaceAll(doc, "/etc/varnish/secret", secret)))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got, _ := cfg.YAML(); string(got) != string(want) {
			t.Errorf("%s: the example is not the defaults:\n%s\n--- defaults:\n%s", name, got, want)
		}
	}
	if n := len(uncommentRE.FindAllString(string(b), -1)); n < 30 {
		t.Errorf("only %d commented settings found: is the example still documenting every key?", n)
	}
}

// The help of the operating commands is what an operator reads first.
func TestHelpGolden(t *testing.T) {
	for _, args := range [][]string{
		{"config"}, {"config", "check"}, {"config", "show"},
		{"check"}, {"logs"}, {"start"}, {"stop"}, {"reload"},
	} {
		name := strings.Join(args, "-")
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, append(args, "--help")...)
			if code != 0 || stderr != "" {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			golden.Check(t, "help/"+name+".golden", []byte(stdout))
		})
	}
}

// config check refuses a bad sites block with every problem's key and
// line, and warns, without refusing, about sites whose profiles could
// pass Varnish's max_vcl.
func TestConfigCheckSites(t *testing.T) {
	const target = "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n"
	path, _ := configtest.File(t, target+`sites:
  - { name: shop, hosts: [shop.example.com] }
  - { name: wiki, hosts: [Shop.Example.com, 'a*.example.com'] }
  - { name: default, hosts: [www.example.com] }
`)
	code, stdout, stderr := runMain(t, "config", "check", "--config", path)
	want := "gearshift: config " + path + " has 3 problems:\n" +
		"sites[1].hosts[0]: Shop.Example.com is already a host of site shop (sites[0].hosts[0]), not of wiki too: a host belongs to one site (line 4)\n" +
		`sites[1].hosts[1]: "a*.example.com": a glob's * must be the whole leftmost label, as in *.example.com (line 4)` + "\n" +
		"sites[2].hosts: the default site serves every host no other site claims: drop its hosts, or give them a site of their own (line 5)\n"
	if code != 2 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant 2 and:\n%s", code, stdout, stderr, want)
	}

	var b strings.Builder
	b.WriteString(target + "sites:\n")
	for i := range 40 {
		fmt.Fprintf(&b, "  - { name: s%d, hosts: [s%d.example.com], profiles: { heavy_min_ttl: %dm } }\n", i, i, 3+i)
	}
	path, _ = configtest.File(t, b.String())
	code, stdout, stderr = runMain(t, "config", "check", "--config", path)
	want = "gearshift: warning: sites: 41 distinct sets of site profiles overrides load 124 VCLs, and a reload briefly 248 beside Varnish's own: more than varnishd's default max_vcl (100)"
	if code != 0 || !strings.HasPrefix(stdout, "config OK") || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, config OK and a warning beginning %q", code, stdout, stderr, want)
	}
}

// A reload with a sites block the daemon would refuse sends nothing: the
// running daemon keeps its sites.
func TestReloadRefusesBadSites(t *testing.T) {
	config, _ := stub(t, `trap "echo hup >> hups" HUP`)
	b, _ := os.ReadFile(config)
	os.WriteFile(config, append(b, "sites: [ { name: shop, hosts: [shop.example.com] }, { name: wiki, hosts: [SHOP.example.com] } ]\n"...), 0o644)
	code, _, stderr := runMain(t, "reload", "--config", config)
	if code != 2 || !strings.Contains(stderr, "sites[1].hosts[0]: SHOP.example.com is already a host of site shop") || !strings.Contains(stderr, "not reloading") {
		t.Errorf("reload with bad sites: exit %d, %q", code, stderr)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(filepath.Dir(config), "hups")); err == nil {
		t.Error("SIGHUP sent despite the bad sites")
	}
}

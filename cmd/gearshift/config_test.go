package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// opsConfigFile writes a config document into a temp dir; $DIR in doc
// names that dir, where a readable admin secret waits as $DIR/secret.
func opsConfigFile(tb testing.TB, doc string) (path, dir string) {
	tb.Helper()
	dir = tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("not-to-be-printed\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	path = filepath.Join(dir, "gearshift.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(doc, "$DIR", dir)), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path, dir
}

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
			path, dir := opsConfigFile(t, tc.doc)
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
	path, dir := opsConfigFile(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\nstates: { heavy: { enter: { load_per_cpu: 2 } } }\nhysteresis: { down_window: 5m }\n")
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
	again, _ := opsConfigFile(t, body)
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
	path, _ := opsConfigFile(t, target+"sensor: { phpfpm: { url: "+notFPM.URL+"/fpm-status } }\n")
	code, stdout, stderr := runMain(t, "config", "check", "--config", path)
	want := "gearshift: config " + path + ": sensor.phpfpm: " + notFPM.URL + "/fpm-status?json&full: not a PHP-FPM status page (not the JSON of ?json: it begins \"<html>"
	if code != 2 || stdout != "" || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line beginning %q", code, stdout, stderr, want)
	}

	gone := filepath.Join(t.TempDir(), "php8.2-fpm.sock")
	path, _ = opsConfigFile(t, target+"sensor: { phpfpm: { socket: "+gone+" } }\n")
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
	def := config.Default()
	def.Varnish.Targets[0].SecretFile = secret
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

// install.sh into a DESTDIR: everything in place with the right modes and
// the binary's path filled in; a re-run leaves a changed file under /etc
// alone (the new one goes beside it as .dist) and upgrades an unchanged
// one; --uninstall keeps what the admin changed, and PURGE=1 removes it.
func TestInstallScript(t *testing.T) {
	dest := t.TempDir()
	script := func(env string, args ...string) string {
		t.Helper()
		cmd := exec.Command("sh", append([]string{filepath.Join("..", "..", "scripts", "install.sh")}, append(args, gearshiftBin)...)...)
		cmd.Env = append(os.Environ(), "DESTDIR="+dest, "PREFIX=/opt/gearshift", env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	install := func() string { t.Helper(); return script("") }
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dest, path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	exists := func(path string) bool {
		_, err := os.Lstat(filepath.Join(dest, path))
		return err == nil
	}

	install()
	for path, mode := range map[string]os.FileMode{
		"opt/gearshift/bin/gearshift":                                       0o755,
		"etc/gearshift/gearshift.yaml":                                      0o640,
		"etc/systemd/system/gearshift.service":                              0o644,
		"etc/cron.d/gearshift":                                              0o644,
		"etc/logrotate.d/gearshift":                                         0o644,
		"opt/gearshift/share/man/man8/gearshift.8":                          0o644,
		"opt/gearshift/share/man/man8/gearshift-check.8":                    0o644,
		"opt/gearshift/share/bash-completion/completions/gearshift":         0o644,
		"opt/gearshift/share/zsh/site-functions/_gearshift":                 0o644,
		"opt/gearshift/share/fish/vendor_completions.d/gearshift.fish":      0o644,
		"opt/gearshift/share/doc/gearshift/examples/gearshift.yaml":         0o644,
		"opt/gearshift/share/gearshift/installed":                           0o644,
		"opt/gearshift/share/gearshift/hooks/webhook.sh":                    0o755,
		"opt/gearshift/share/gearshift/hooks/logger.sh":                     0o755,
		"opt/gearshift/share/gearshift/varnish/gearshift-label.vcl":         0o644,
		"opt/gearshift/share/gearshift/monitoring/gearshift-alerts.yml":     0o644,
		"opt/gearshift/share/gearshift/monitoring/gearshift-dashboard.json": 0o644,
		"var/log/gearshift":                                                 0o750 | os.ModeDir,
	} {
		fi, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("not installed: %v", err)
			continue
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), mode)
		}
	}
	for what, want := range map[string]string{
		read("etc/systemd/system/gearshift.service"): "\nExecStart=/opt/gearshift/bin/gearshift run --config /etc/gearshift/gearshift.yaml\n",
		read("etc/cron.d/gearshift"):                 "root\t/opt/gearshift/bin/gearshift check --restart --quiet\n",
	} {
		if !strings.Contains(what, want) || strings.Contains(what, "/usr/local/bin/gearshift") {
			t.Errorf("binary path not filled in, want %q in:\n%s", want, what)
		}
	}
	if out := install(); strings.Contains(out, "installed") || strings.Contains(out, "kept") {
		t.Errorf("a second install of the same release, want nothing done:\n%s", out)
	}

	// The admin edits the config and the unit; an older release installed
	// the logrotate file, untouched since (its checksum in the record).
	const mine = "# the operator's own\nbackend: { port: 8081 }\n"
	const myUnit = "[Service]\nExecStart=/bin/true\n"
	os.WriteFile(filepath.Join(dest, "etc/gearshift/gearshift.yaml"), []byte(mine), 0o600)
	os.WriteFile(filepath.Join(dest, "etc/systemd/system/gearshift.service"), []byte(myUnit), 0o644)
	const old = "# an older release's rotation\n"
	os.WriteFile(filepath.Join(dest, "etc/logrotate.d/gearshift"), []byte(old), 0o644)
	manifest := filepath.Join(dest, "opt/gearshift/share/gearshift/installed")
	sum := sha256.Sum256([]byte(old))
	rec := regexp.MustCompile(`(?m)^(\S+) \S+ (/etc/logrotate.d/gearshift)$`).ReplaceAllString(read("opt/gearshift/share/gearshift/installed"), "$1 "+hex.EncodeToString(sum[:])+" $2")
	os.WriteFile(manifest, []byte(rec), 0o644)

	out := install()
	if got := read("etc/gearshift/gearshift.yaml"); got != mine {
		t.Errorf("an upgrade overwrote the changed config:\n%s", got)
	}
	if got := read("etc/systemd/system/gearshift.service"); got != myUnit {
		t.Errorf("an upgrade overwrote the changed unit:\n%s", got)
	}
	shipped, _ := os.ReadFile(filepath.Join("..", "..", "scripts", "gearshift.yaml"))
	if got := read("etc/gearshift/gearshift.yaml.dist"); got != string(shipped) {
		t.Errorf("gearshift.yaml.dist is not the shipped config:\n%s", got)
	}
	if !strings.Contains(read("etc/systemd/system/gearshift.service.dist"), "ExecStart=/opt/gearshift/bin/gearshift run") {
		t.Error("no gearshift.service.dist beside the changed unit")
	}
	if got := read("etc/logrotate.d/gearshift"); got == old || exists("etc/logrotate.d/gearshift.dist") {
		t.Errorf("the unchanged logrotate file was not upgraded in place:\n%s", got)
	}
	for _, want := range []string{
		"kept /etc/gearshift/gearshift.yaml (changed since it was installed); the new version is /etc/gearshift/gearshift.yaml.dist",
		"kept /etc/systemd/system/gearshift.service (changed",
		"installed /etc/logrotate.d/gearshift",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}

	out = script("", "--uninstall")
	for path, want := range map[string]bool{
		"etc/gearshift/gearshift.yaml":              true, // changed: the admin's
		"etc/systemd/system/gearshift.service":      true,
		"var/log/gearshift":                         true,
		"etc/gearshift/gearshift.yaml.dist":         false,
		"etc/systemd/system/gearshift.service.dist": false,
		"etc/cron.d/gearshift":                      false,
		"etc/logrotate.d/gearshift":                 false,
		"opt/gearshift/bin/gearshift":               false,
		"opt/gearshift/share/man/man8/gearshift.8":  false,
		"opt/gearshift/share/gearshift":             false,
		"opt/gearshift/share/doc/gearshift":         false,
	} {
		if exists(path) != want {
			t.Errorf("after --uninstall, %s exists: %v, want %v", path, !want, want)
		}
	}
	if !strings.Contains(out, "kept /etc/gearshift/gearshift.yaml (changed since it was installed; PURGE=1 removes it)") {
		t.Errorf("uninstall does not say it kept the config:\n%s", out)
	}
	script("PURGE=1", "--uninstall")
	for _, path := range []string{"etc/gearshift", "etc/systemd/system/gearshift.service", "var/log/gearshift"} {
		if exists(path) {
			t.Errorf("after PURGE=1 --uninstall, %s is left", path)
		}
	}
}

// The unit passes systemd's own checks. systemd-analyze comes with Debian's
// systemd; in CI its absence fails the test rather than skipping it.
func TestServiceUnitVerifies(t *testing.T) {
	analyze := testenv.Need(t, "systemd-analyze", "systemd")
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "gearshift.service"))
	if err != nil {
		t.Fatal(err)
	}
	// The loop's keep-alives are worth something only if systemd expects them.
	if !strings.Contains(string(b), "\nWatchdogSec=") || !strings.Contains(string(b), "\nType=notify\n") {
		t.Error("the unit has no WatchdogSec= (or is not Type=notify): a hung loop would never be restarted")
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "gearshift.service")
	os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/gearshift", gearshiftBin)), 0o644)
	// verify also opens the Documentation= pages: gearshift(8) from the
	// generated manual, varnishd(1) from the system's.
	if _, stderr, code := runGearshift(t, "manpages", filepath.Join(dir, "man", "man8")); code != 0 {
		t.Fatalf("gearshift manpages: exit %d: %s", code, stderr)
	}
	verify := exec.Command(analyze, "verify", unit)
	verify.Env = append(os.Environ(), "MANPATH="+filepath.Join(dir, "man")+":")
	if out, err := verify.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
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

// A config or VCL file others may write, or one too big to be a config, is
// refused by every command that would act on it, naming the file.
func TestUntrustedOrHugeConfigRefused(t *testing.T) {
	const target = "varnish: { targets: [ { admin: 127.0.0.1:1, secret_file: $DIR/secret } ] }\n"
	worldWritable := func(t *testing.T) (string, string) {
		path, _ := opsConfigFile(t, target)
		os.Chmod(path, 0o666)
		return path, path + " is writable by every user"
	}
	openVCL := func(t *testing.T) (string, string) {
		path, dir := opsConfigFile(t, target+"profiles: { heavy: { vcl_file: $DIR/vcl/heavy.vcl } }\n")
		os.Mkdir(filepath.Join(dir, "vcl"), 0o755)
		os.WriteFile(filepath.Join(dir, "vcl", "heavy.vcl"), []byte("vcl 4.1;\nbackend default none;\n"), 0o644)
		os.Chmod(filepath.Join(dir, "vcl"), 0o777)
		return path, filepath.Join(dir, "vcl") + ", is writable by every user"
	}
	huge := func(t *testing.T) (string, string) { return "/dev/zero", "larger than 1 MiB" }
	for _, setup := range []struct {
		name string
		make func(t *testing.T) (path, errHas string)
	}{{"world-writable config", worldWritable}, {"vcl_file in a world-writable directory", openVCL}, {"/dev/zero", huge}} {
		for _, args := range [][]string{{"config", "check"}, {"run"}, {"start"}} {
			t.Run(setup.name+"/"+strings.Join(args, " "), func(t *testing.T) {
				path, errHas := setup.make(t)
				out, errOut, code := runGearshift(t, append(args, "--config", path)...)
				if code != 2 || !strings.Contains(out+errOut, errHas) {
					t.Errorf("exit %d, %q %q; want 2 and %q", code, out, errOut, errHas)
				}
			})
		}
	}
}

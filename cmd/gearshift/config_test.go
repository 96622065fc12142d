package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/golden"
	"github.com/gearshift/gearshift/profiles"
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
	def := profiles.Default()
	def.Varnish.Targets[0].SecretFile = secret
	want, _ := def.YAML()
	for name, doc := range map[string]string{
		"as shipped":  string(b),
		"uncommented": uncommentRE.ReplaceAllString(string(b), "$1$2"),
	} {
		cfg, err := profiles.Parse([]byte(strings.ReplaceAll(doc, "/etc/varnish/secret", secret)))
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

// install.sh into a DESTDIR: everything in place with the right modes, the
// binary's path filled in, and a second run keeps the operator's config.
func TestInstallScript(t *testing.T) {
	dest := t.TempDir()
	install := func() string {
		t.Helper()
		cmd := exec.Command("sh", filepath.Join("..", "..", "scripts", "install.sh"), gearshiftBin)
		cmd.Env = append(os.Environ(), "DESTDIR="+dest, "PREFIX=/opt/gearshift")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	install()
	for path, mode := range map[string]os.FileMode{
		"opt/gearshift/bin/gearshift":                               0o755,
		"etc/gearshift/gearshift.yaml":                              0o640,
		"etc/gearshift/gearshift.yaml.example":                      0o644,
		"etc/systemd/system/gearshift.service":                      0o644,
		"etc/cron.d/gearshift":                                      0o644,
		"etc/logrotate.d/gearshift":                                 0o644,
		"opt/gearshift/share/gearshift/hooks/webhook.sh":            0o755,
		"opt/gearshift/share/gearshift/hooks/logger.sh":             0o755,
		"opt/gearshift/share/gearshift/varnish/gearshift-label.vcl": 0o644,
		"var/log/gearshift":                                         0o750 | os.ModeDir,
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
	unit, _ := os.ReadFile(filepath.Join(dest, "etc/systemd/system/gearshift.service"))
	cron, _ := os.ReadFile(filepath.Join(dest, "etc/cron.d/gearshift"))
	for what, want := range map[string]string{
		string(unit): "\nExecStart=/opt/gearshift/bin/gearshift run --config /etc/gearshift/gearshift.yaml\n",
		string(cron): "root\t/opt/gearshift/bin/gearshift check --restart --quiet\n",
	} {
		if !strings.Contains(what, want) || strings.Contains(what, "/usr/local/bin/gearshift") {
			t.Errorf("binary path not filled in, want %q in:\n%s", want, what)
		}
	}

	conf := filepath.Join(dest, "etc/gearshift/gearshift.yaml")
	mine := []byte("# the operator's own\nbackend: { port: 8081 }\n")
	os.WriteFile(conf, mine, 0o600)
	out := install()
	if got, _ := os.ReadFile(conf); string(got) != string(mine) {
		t.Errorf("a second install overwrote the config:\n%s", got)
	}
	if !strings.Contains(out, "kept /etc/gearshift/gearshift.yaml") || strings.Contains(out, "installed") {
		t.Errorf("second install, want nothing installed and the config kept:\n%s", out)
	}
}

// The unit passes systemd's own checks. systemd-analyze comes with Debian's
// systemd; in CI its absence fails the test rather than skipping it.
func TestServiceUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not installed (Debian package systemd)")
		}
		t.Skip("systemd-analyze not installed")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "gearshift.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "gearshift.service")
	os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/gearshift", gearshiftBin)), 0o644)
	if out, err := exec.Command(analyze, "verify", unit).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
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

package system

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

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

// A config or VCL file others may write, or one too big to be a config, is
// refused by every command that would act on it, naming the file.
func TestUntrustedOrHugeConfigRefused(t *testing.T) {
	const target = "varnish: { targets: [ { admin: 127.0.0.1:1, secret_file: $DIR/secret } ] }\n"
	worldWritable := func(t *testing.T) (string, string) {
		path, _ := configtest.File(t, target)
		os.Chmod(path, 0o666)
		return path, path + " is writable by every user"
	}
	openVCL := func(t *testing.T) (string, string) {
		path, dir := configtest.File(t, target+"profiles: { heavy: { vcl_file: $DIR/vcl/heavy.vcl } }\n")
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

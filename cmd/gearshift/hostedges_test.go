package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// config check says when the admin secret can be read by others, and the
// config is still OK.
func TestConfigCheckWarnsReadableSecret(t *testing.T) {
	path, dir := opsConfigFile(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n")
	secret := filepath.Join(dir, "secret")
	if code, stdout, stderr := runMain(t, "config", "check", "--config", path); code != 0 || stderr != "" || !strings.HasPrefix(stdout, "config OK") {
		t.Fatalf("a 0600 secret: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	os.Chmod(secret, 0o644)
	code, stdout, stderr := runMain(t, "config", "check", "--config", path)
	want := "gearshift: warning: varnish.targets[0].secret_file: " + secret + " can be read by its group or by every user (mode 0644), and the secret gives control of Varnish: chmod 0600 " + secret + "\n"
	if code != 0 || !strings.HasPrefix(stdout, "config OK") || stderr != want {
		t.Errorf("a 0644 secret: exit %d, stdout %q, stderr %q; want exit 0 and\n%s", code, stdout, stderr, want)
	}
}

// webhook.sh gives curl the webhook's URL, a secret, on stdin and never on
// its command line, which every user sees in ps; the URL may come from a
// file, so that the hook's own command line does not show it either.
func TestWebhookURLNotOnCommandLine(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "curl.log")
	fake := "#!/bin/sh\n{ printf 'argv:'; printf ' [%s]' \"$@\"; printf '\\nstdin:'; cat; } >" + record + "\n"
	if err := os.WriteFile(filepath.Join(dir, "curl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	const url = `https://hooks.example.com/T000/B000/s3cr3t"\x`
	urlFile := filepath.Join(dir, "webhook.url")
	os.WriteFile(urlFile, []byte(url+"\n"), 0o600)
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "hooks", "webhook.sh"))
	for _, arg := range []string{url, urlFile} {
		os.Remove(record)
		cmd := exec.Command("/bin/sh", script, arg)
		cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "GEARSHIFT_FROM=light", "GEARSHIFT_TO=heavy", "GEARSHIFT_MODE=auto", "GEARSHIFT_REASON=load"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("webhook.sh %s: %v\n%s", arg, err, out)
		}
		b, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		argv, stdin, _ := strings.Cut(string(b), "\nstdin:")
		if strings.Contains(argv, "s3cr3t") || !strings.Contains(argv, "[--config] [-]") || !strings.Contains(argv, `"to":"heavy"`) {
			t.Errorf("webhook.sh %s: curl's %s", arg, argv)
		}
		if want := `url = "https://hooks.example.com/T000/B000/s3cr3t\"\\x"` + "\n"; stdin != want {
			t.Errorf("webhook.sh %s: curl's stdin %q, want %q", arg, stdin, want)
		}
	}
}

package main

import (
	"os"
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

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The directories above the path as given are judged, not only those above
// the file it resolves to: whoever can write a link's directory can point
// the link at a config of their own.
func TestLoadJudgesBothPaths(t *testing.T) {
	r := fixture(t)
	dir := t.TempDir()
	real := filepath.Join(dir, "etc", "gearshift.yaml")
	os.MkdirAll(filepath.Dir(real), 0o755)
	os.WriteFile(real, []byte(r.Replace(base)), 0o644)
	if _, err := Load(real); err != nil {
		t.Fatalf("a trusted config: %v", err)
	}

	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o777)
	link := filepath.Join(open, "gearshift.yaml")
	os.Symlink(real, link)
	_, err := Load(link)
	if err == nil || !strings.Contains(err.Error(), "a directory above it, "+open+", is writable by every user") {
		t.Errorf("Load through a link in a world-writable directory = %v, want the directory named", err)
	}

	if os.Geteuid() == 0 {
		bobs := filepath.Join(dir, "bobs")
		os.Mkdir(bobs, 0o755)
		os.Chown(bobs, 65534, 65534)
		p := filepath.Join(bobs, "gearshift.yaml")
		os.WriteFile(p, []byte(r.Replace(base)), 0o644)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "a directory above it, "+bobs+", belongs to uid 65534") {
			t.Errorf("Load of a config in another user's directory = %v", err)
		}
	}

	// A device is not a config: refused before it is parsed.
	if _, err := Load("/dev/null"); err == nil || !strings.Contains(err.Error(), "/dev/null is not a regular file") {
		t.Errorf("Load(/dev/null) = %v", err)
	}
}

// The hook is a program root runs: it gets the config's trust check.
func TestHookMustBeTrusted(t *testing.T) {
	r := fixture(t)
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook.sh")
	os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o755)
	doc := r.Replace(base) + "hooks: { on_change: [" + hook + "] }\n"
	if _, err := Parse([]byte(doc)); err != nil {
		t.Fatalf("a trusted hook: %v", err)
	}
	os.Chmod(hook, 0o777)
	_, err := Parse([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "hooks.on_change[0]: "+hook+" is writable by every user") {
		t.Errorf("a world-writable hook: %v", err)
	}
	os.Chmod(hook, 0o755)
	os.Chmod(dir, 0o777)
	defer os.Chmod(dir, 0o755)
	if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "hooks.on_change[0]: a directory above it, "+dir+", is writable by every user") {
		t.Errorf("a hook in a world-writable directory: %v", err)
	}
	// Offline commands may still use the config: it is about this machine.
	if cfg, err := Offline(func() error { _, err := Parse([]byte(doc)); return err }()); err != nil || cfg == nil {
		t.Errorf("Offline of an untrusted hook = %v", err)
	}
}

// A secret other users can read is a warning, not an error.
func TestSecretReadableByOthersWarns(t *testing.T) {
	r := fixture(t)
	secret := strings.TrimSuffix(r.Replace("{{secret}}"), "\n")
	cfg, err := Parse([]byte(r.Replace(base)))
	if err != nil {
		t.Fatal(err)
	}
	if ws := cfg.Warnings(); len(ws) != 0 {
		t.Errorf("a 0600 secret: warnings %v", ws)
	}
	for _, mode := range []os.FileMode{0o640, 0o604} {
		os.Chmod(secret, mode)
		cfg, err := Parse([]byte(r.Replace(base)))
		if err != nil {
			t.Fatalf("a %04o secret is refused: %v", mode, err)
		}
		ws := cfg.Warnings()
		if len(ws) != 1 || !strings.HasPrefix(ws[0].String(), "varnish.targets[0].secret_file: "+secret+" can be read by its group or by every user") ||
			!strings.Contains(ws[0].String(), "chmod 0600 "+secret) || strings.Contains(ws[0].String(), "s3cr3t") {
			t.Errorf("a %04o secret: warnings %v", mode, ws)
		}
	}
}

// Credentials over plain http are a warning.
func TestPrometheusCredentialsOverHTTPWarn(t *testing.T) {
	r := fixture(t)
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("t0ken\n"), 0o600)
	doc := r.Replace(base) + "sensor: { prometheus: { url: 'http://prom.example:9090', bearer_token_file: " + token + ", signals: { fleet: 'max(x)' } } }\n"
	cfg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	ws := cfg.Warnings()
	if len(ws) != 1 || ws[0].String() != "sensor.prometheus.url: credentials go to http://prom.example:9090 over plain http, readable on the way: use https" {
		t.Errorf("warnings %v", ws)
	}
	cfg, err = Parse([]byte(strings.Replace(doc, "http://", "https://", 1)))
	if err != nil || len(cfg.Warnings()) != 0 {
		t.Errorf("https: %v, warnings %v", err, cfg.Warnings())
	}
}

// The directories the daemon writes its pid file, log and history in get
// the config's trust check: whoever can write one could swap the pid file
// (and have stop or logrotate signal a process of their choosing) or plant
// links. A sticky directory (/tmp) and one not made yet under a trusted
// parent are fine. The pid file's and the log's are refused; history.dir's
// is a warning (warns): the recorder refuses to write there, and the
// daemon runs without a history.
func TestWrittenDirectoriesMustBeTrusted(t *testing.T) {
	r := fixture(t)
	for _, tc := range []struct {
		key   string
		doc   func(dir string) string
		warns bool
	}{
		{"history.dir", func(dir string) string { return "history: { dir: " + dir + " }\n" }, true},
		{"pid_file", func(dir string) string { return "pid_file: " + filepath.Join(dir, "gearshift.pid") + "\n" }, false},
		{"log.file", func(dir string) string { return "log: { file: " + filepath.Join(dir, "gearshift.log") + " }\n" }, false},
	} {
		t.Run(tc.key, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "run")
			os.Mkdir(dir, 0o755)
			// parse is the config's refusal, or its warning about tc.key
			// for a key it warns about.
			parse := func(dir string) error {
				cfg, err := Parse([]byte(r.Replace(base) + tc.doc(dir)))
				if err != nil || !tc.warns {
					return err
				}
				for _, w := range cfg.Warnings() {
					if w.Path == tc.key {
						return errors.New(w.String())
					}
				}
				return nil
			}
			if err := parse(dir); err != nil {
				t.Fatalf("a trusted directory: %v", err)
			}
			if err := parse(filepath.Join(dir, "not", "yet")); err != nil {
				t.Fatalf("a directory to be made under a trusted one: %v", err)
			}

			os.Chmod(dir, 0o777)
			err := parse(dir)
			if err == nil || !strings.Contains(err.Error(), tc.key+": the directory "+dir+" is writable by every user") {
				t.Errorf("a world-writable directory = %v, want it named under %s", err, tc.key)
			}
			if err := parse(filepath.Join(dir, "not", "yet")); err == nil || !strings.Contains(err.Error(), tc.key+": the directory "+dir+" is writable by every user") {
				t.Errorf("a directory to be made under a world-writable one = %v", err)
			}
			os.Chmod(dir, 0o777|os.ModeSticky)
			if err := parse(dir); err != nil {
				t.Errorf("a sticky world-writable directory (as /tmp): %v", err)
			}

			// The link's directory counts, not only where it leads.
			os.Chmod(dir, 0o755)
			open := filepath.Join(top, "open")
			os.Mkdir(open, 0o755)
			os.Chmod(open, 0o777)
			link := filepath.Join(open, "link")
			os.Symlink(dir, link)
			if err := parse(link); err == nil || !strings.Contains(err.Error(), "a directory above it, "+open+", is writable by every user") {
				t.Errorf("a directory reached through a link in a world-writable one = %v", err)
			}

			if os.Geteuid() == 0 {
				os.Chown(dir, 65534, 65534)
				if err := parse(dir); err == nil || !strings.Contains(err.Error(), tc.key+": the directory "+dir+" belongs to uid 65534") {
					t.Errorf("another user's directory = %v", err)
				}
			}
			// Offline commands may still read the config.
			if cfg, err := Offline(parse(dir)); !tc.warns && (err != nil || cfg == nil) {
				t.Errorf("Offline of an untrusted directory = %v", err)
			}
		})
	}
}

// profiles.purge_token_file: a file that holds no usable token is refused,
// saying why and never quoting it; one every user may read is a warning.
func TestPurgeTokenFile(t *testing.T) {
	r := fixture(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "purge-token")
	doc := r.Replace(base) + "profiles: { purge_token_file: " + token + " }\n"
	for _, tc := range []struct{ content, want string }{
		{"", "is empty"},
		{"short-secret\n", "holds a token of 12 characters: use 16 or more"},
		{"two words in it, 1234567890\n", "holds characters other than letters"},
	} {
		os.WriteFile(token, []byte(tc.content), 0o600)
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "profiles.purge_token_file: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("token %q: %v, want %q", tc.content, err, tc.want)
		}
		if err != nil && tc.content != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.content)) {
			t.Errorf("the error quotes the token: %v", err)
		}
	}
	os.Remove(token)
	if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "profiles.purge_token_file: cannot read "+token) {
		t.Errorf("a missing token file: %v", err)
	}
	os.WriteFile(token, []byte("0123456789abcdef0123\n"), 0o600)
	cfg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if ws := cfg.Warnings(); len(ws) != 0 {
		t.Errorf("a 0600 token file: warnings %v", ws)
	}
	os.Chmod(token, 0o644)
	ws := cfg.Warnings()
	if len(ws) != 1 || !strings.HasPrefix(ws[0].String(), "profiles.purge_token_file: "+token+" can be read by every user") {
		t.Errorf("a 0644 token file: warnings %v", ws)
	}
}

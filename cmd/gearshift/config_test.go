package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// opsGolden compares got with testdata/<name>, rewriting the file instead
// when tests run with -update (if the package defines it) or with
// GEARSHIFT_UPDATE_GOLDEN=1.
func opsGolden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	update := os.Getenv("GEARSHIFT_UPDATE_GOLDEN") == "1"
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		update = true
	}
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run with GEARSHIFT_UPDATE_GOLDEN=1 to create it)", err)
	}
	if got != string(want) {
		tb.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

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
			opsGolden(t, tc.golden, strings.ReplaceAll(stdout+stderr, dir, "$DIR"))
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

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckTrusted(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode, dir bool) string {
		t.Helper()
		p := filepath.Join(base, name)
		if dir {
			os.MkdirAll(p, 0o755)
		} else {
			os.WriteFile(p, []byte("vcl 4.1;\n"), 0o644)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("ok.vcl", 0o644, false)
	mk("open.vcl", 0o666, false)
	mk("opendir", 0o777, true)
	mk("opendir/in.vcl", 0o644, false)
	mk("sticky", os.ModeSticky|0o777, true)
	mk("sticky/in.vcl", 0o644, false)
	mk("groupw.vcl", 0o664, false)
	os.Symlink(filepath.Join(base, "open.vcl"), filepath.Join(base, "link.vcl"))
	for _, tc := range []struct {
		name, file, errHas string
	}{
		{"a private file", "ok.vcl", ""},
		{"group-writable is the admin's choice", "groupw.vcl", ""},
		{"world-writable file", "open.vcl", "open.vcl is writable by every user (mode 0666)"},
		{"a world-writable directory above", "opendir/in.vcl", "a directory above it, " + filepath.Join(base, "opendir") + ", is writable by every user"},
		{"a sticky directory, like /tmp", "sticky/in.vcl", ""},
		{"a link is judged by its target", "link.vcl", "open.vcl is writable by every user"},
		{"missing", "nope.vcl", "nope.vcl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTrusted(filepath.Join(base, tc.file))
			if tc.errHas == "" && err != nil || tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
				t.Errorf("CheckTrusted(%s) = %v, want %q", tc.file, err, tc.errHas)
			}
		})
	}
	if os.Geteuid() == 0 {
		p := mk("bobs.vcl", 0o644, false)
		os.Chown(p, 65534, 65534)
		if err := CheckTrusted(p); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("a file of another user: %v", err)
		}
	}
}

func TestLoadRefusesUntrustedAndHugeConfigs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gearshift.yaml")
	os.WriteFile(path, []byte("poll_interval: 2s\n"), 0o644)
	os.Chmod(path, 0o666)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path+" is writable by every user") || strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("Load of a world-writable config = %v, want one sentence naming it", err)
	}

	os.Chmod(path, 0o644)
	vcl := filepath.Join(dir, "heavy.vcl")
	os.WriteFile(vcl, []byte("vcl 4.1;\nbackend default none;\n"), 0o666)
	os.Chmod(vcl, 0o666)
	os.WriteFile(path, []byte("varnish: { targets: [] }\nprofiles: { heavy: { vcl_file: "+vcl+" } }\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "profiles.heavy.vcl_file: "+vcl+" is writable by every user") {
		t.Errorf("Load with a world-writable vcl_file = %v", err)
	}

	for _, huge := range []string{"/dev/zero"} {
		if _, err := Load(huge); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
			t.Errorf("Load(%s) = %v, want refused for its size", huge, err)
		}
		if _, err := LoadLenient(huge); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
			t.Errorf("LoadLenient(%s) = %v, want refused for its size", huge, err)
		}
	}
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// gearshiftBin is the binary built once for the tests that drive gearshift
// as a user would.
var gearshiftBin string

func TestMain(m *testing.M) {
	if order := os.Getenv(hostileEnv); order != "" {
		os.Exit(runHostile(order))
	}
	dir, err := os.MkdirTemp("", "gearshift-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gearshiftBin = filepath.Join(dir, "gearshift")
	args := []string{"build", "-o", gearshiftBin}
	if raceEnabled {
		// go test -race checks the daemon the tests spawn too, not only
		// the test process.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gearshift:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testConfig writes a config for a daemon driving v, with its socket, pid
// file and log under a temp dir, and returns its path. edit may adjust it.
func testConfig(tb testing.TB, v *varnishtest.Varnish, edit func(*config.Config)) (path string, cfg *config.Config) {
	tb.Helper()
	dir := tb.TempDir()
	cfg = config.Default()
	cfg.Varnish.Targets = []config.Target{{Admin: v.AdminAddr, SecretFile: v.SecretFile}}
	cfg.Varnish.Timeout = timefmt.Duration(30e9) // VCL compiles on a busy machine
	cfg.Control.Socket = filepath.Join(dir, "gearshift.sock")
	cfg.PIDFile = filepath.Join(dir, "gearshift.pid")
	cfg.Log.File = filepath.Join(dir, "gearshift.log")
	cfg.History.Dir = filepath.Join(dir, "history")
	cfg.PollInterval = timefmt.Duration(100e6)
	// A guest listener of its own: daemons of tests running side by side
	// must not answer each other's Varnish.
	cfg.Profiles.GuestListen = fmt.Sprintf("127.0.0.1:%d", lampstack.FreePort(tb))
	if edit != nil {
		edit(cfg)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	path = filepath.Join(dir, "gearshift.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path, cfg
}

// Package configtest writes gearshift config files for the tests of its
// commands: an operator's document, and a daemon's config driving a test
// varnishd.
package configtest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// File writes a config document into a temp dir; $DIR in doc names that
// dir, where a readable admin secret waits as $DIR/secret.
func File(tb testing.TB, doc string) (path, dir string) {
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

// ForVarnish writes a config for a daemon driving v, with its socket, pid
// file and log under a temp dir, and returns its path. edit may adjust it.
// The file has no states block unless edit changed the rules: a file that
// gives a gear's rule replaces its defaults whole, the conditions of the
// sources the config turns on (backend_busy, the PHP-FPM queue) included,
// and the daemon is to run the default rules as an operator's file that
// does not name them gets them.
func ForVarnish(tb testing.TB, v *varnishtest.Varnish, edit func(*config.Config)) (path string, cfg *config.Config) {
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
	b, err := marshalOwnRules(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	path = filepath.Join(dir, "gearshift.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path, cfg
}

// marshalOwnRules writes cfg as YAML, without its states block when it
// holds the default rules.
func marshalOwnRules(cfg *config.Config) ([]byte, error) {
	var doc map[string]any
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if reflect.DeepEqual(cfg.States, config.Default().States) {
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, err
		}
		delete(doc, "states")
		return yaml.Marshal(doc)
	}
	return b, nil
}

// Package architecture holds the tests of the whole tree rather than of
// one package: the layers of docs/development.md and the length of files
// (TestLayers, TestFileLengths), the links of the docs (TestDocLinks),
// gears as rows (TestGearsAreRows) and a fourth gear (TestAFourthGear).
package architecture

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gearshift/gearshift"

// root is the module's root, seen from this package.
var root = filepath.Join("..", "..")

// eachFile calls do with the path (from the module's root) and contents
// of every file of the tree whose name ends in one of exts, outside
// hidden folders and testdata, and fails the test when it found fewer
// than a whole tree's.
func eachFile(t *testing.T, exts []string, do func(rel string, b []byte)) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !slices.Contains(exts, filepath.Ext(p)) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, p)
		do(filepath.ToSlash(rel), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files under %s, want the whole tree", files, root)
	}
}

// TestLayers reads every Go file's imports and holds the layers
// docs/development.md draws: the utilities of internal/ import no
// gearshift package, only tests import internal/testsupport, only the
// commands of cmd/gearshift (and the offline commands themselves) import
// internal/offline, so the loop and its parts never reach an offline
// command; an offline command never imports the loop or cmd; nothing
// outside cmd imports cmd; and no package imports its parent (a test
// may: an integration test of it). tests/ holds tests only: its
// packages are go test's alone, built on by nothing.
func TestLayers(t *testing.T) {
	eachFile(t, []string{".go"}, func(rel string, b []byte) {
		if under(path.Dir(rel), "tests") && !strings.HasSuffix(rel, "_test.go") {
			t.Errorf("%s is not a test: tests/ holds tests only", rel)
		}
		f, err := parser.ParseFile(token.NewFileSet(), rel, b, parser.ImportsOnly)
		if err != nil {
			t.Error(err)
			return
		}
		for _, im := range f.Imports {
			imp, _ := strconv.Unquote(im.Path.Value)
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			imp = strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if msg := layerProblem(path.Dir(rel), imp, strings.HasSuffix(rel, "_test.go")); msg != "" {
				t.Errorf("%s imports %s: %s", rel, imp, msg)
			}
		}
	})
}

// The rooms of internal/: the tests' support, and the offline commands
// (what a one-shot command of cmd/gearshift does that the loop never
// calls). Every other package of internal/ is a utility, a leaf.
const (
	support = "internal/testsupport"
	offline = "internal/offline"
)

// under tells whether package p is room or a package inside it.
func under(p, room string) bool { return p == room || strings.HasPrefix(p, room+"/") }

// layerProblem says what is wrong with package dir importing package imp
// (both paths inside the module), "" when nothing is.
func layerProblem(dir, imp string, test bool) string {
	inSupport, inOffline := under(dir, support), under(dir, offline)
	switch {
	case under(dir, "internal") && !inSupport && !inOffline:
		return "a utility of internal/ imports no gearshift package"
	case under(imp, support) && !test && !inSupport:
		return "only tests import the test support"
	case under(imp, offline) && dir != "cmd/gearshift" && !inOffline:
		return "only the commands of cmd/gearshift import an offline command: the loop and its parts never do"
	case inOffline && (imp == "controller" || under(imp, "cmd")):
		return "an offline command reads the loop's parts, never the loop or the commands"
	case under(imp, "cmd") && !under(dir, "cmd"):
		return "nothing outside cmd imports cmd"
	case imp == path.Dir(dir) && dir != "." && !test:
		return "a package does not import its parent"
	}
	return ""
}

func TestLayerProblem(t *testing.T) {
	for _, c := range []struct {
		dir, imp string
		test     bool
		bad      bool
	}{
		{"internal/timefmt", "controller/state", false, true},
		{"internal/timefmt", "controller/state", true, true},
		{"internal/testsupport/lampstack", "controller/config", false, false},
		{"controller", "internal/testsupport/varnishtest", true, false},
		{"controller", "internal/testsupport/varnishtest", false, true},
		{"controller/hooks", "controller", false, true},
		{"controller/varnish", "controller", false, true}, // the reconciler never imports the loop
		{"profiles/apps", "profiles", true, false},
		{"cmd/gearshift/daemon", "controller", false, false},
		{"controller", "internal/timefmt", false, false},
		// The offline commands: read by cmd/gearshift alone, reading the parts.
		{"cmd/gearshift", "internal/offline/health", false, false},
		{"cmd/gearshift", "internal/offline/replay", true, false},
		{"controller", "internal/offline/ban", false, true},
		{"controller/api", "internal/offline/health", false, true},
		{"controller/api", "internal/offline/health", true, true},
		{"cmd/gearshift/daemon", "internal/offline/profilecheck", false, true},
		{"profiles", "internal/offline/profilecheck", false, true},
		{"internal/offline/replay", "controller/report", false, false},
		{"internal/offline/health", "controller/api", false, false},
		{"internal/offline/health", "internal/testsupport/golden", true, false},
		{"internal/offline/replay", "internal/offline/ban", false, false},
		{"internal/offline/ban", "controller", false, true},
		{"internal/offline/ban", "cmd/gearshift", false, true},
		{"controller", "cmd/gearshift/daemon", false, true},
		// tests/: go test's alone, on the test support like any test.
		{"tests/system", "internal/testsupport/varnishtest", true, false},
		{"tests/system", "cmd/gearshift", true, true},
	} {
		if got := layerProblem(c.dir, c.imp, c.test); (got != "") != c.bad {
			t.Errorf("layerProblem(%s, %s, test %v) = %q, want a problem: %v", c.dir, c.imp, c.test, got, c.bad)
		}
	}
}

// maxLines bounds a file of code: one a reader takes in at a sitting.
const maxLines = 600

// TestFileLengths: no Go, VCL or shell file in the tree, and no page of
// the docs, is longer than maxLines. Data files (traces, goldens, the
// dashboard) are not read that way, nor BENCHMARKS.md: a record of runs
// that grows with each.
func TestFileLengths(t *testing.T) {
	eachFile(t, []string{".go", ".vcl", ".sh", ".md"}, func(rel string, b []byte) {
		if rel == "BENCHMARKS.md" {
			return
		}
		if n := bytes.Count(b, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, more than %d: split it where its parts meet", rel, n, maxLines)
		}
	})
}

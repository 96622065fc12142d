package testenv

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gearshift/gearshift"

// TestLayers reads every Go file's imports and holds the layers
// docs/development.md draws: the utilities of internal/ import no
// gearshift package, only tests import internal/testsupport, and no
// package imports its parent (a test may: an integration test of it).
func TestLayers(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		dir := filepath.ToSlash(filepath.Dir(rel))
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, im := range f.Imports {
			imp, _ := strconv.Unquote(im.Path.Value)
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			imp = strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if msg := layerProblem(dir, imp, strings.HasSuffix(p, "_test.go")); msg != "" {
				t.Errorf("%s imports %s: %s", rel, imp, msg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s, want the whole tree", files, root)
	}
}

// layerProblem says what is wrong with package dir importing package imp
// (both paths inside the module), "" when nothing is.
func layerProblem(dir, imp string, test bool) string {
	const support = "internal/testsupport"
	inSupport := dir == support || strings.HasPrefix(dir, support+"/")
	switch {
	case strings.HasPrefix(dir, "internal/") && !inSupport:
		return "a utility of internal/ imports no gearshift package"
	case (imp == support || strings.HasPrefix(imp, support+"/")) && !test && !inSupport:
		return "only tests import the test support"
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
		{"controller/ban", "controller", false, true},
		{"cmd/gearshift/daemon", "controller", false, false},
		{"controller", "internal/timefmt", false, false},
	} {
		if got := layerProblem(c.dir, c.imp, c.test); (got != "") != c.bad {
			t.Errorf("layerProblem(%s, %s, test %v) = %q, want a problem: %v", c.dir, c.imp, c.test, got, c.bad)
		}
	}
}

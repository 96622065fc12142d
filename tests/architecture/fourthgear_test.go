package architecture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// recipeFile is a file the recipe names, in backquotes.
var recipeFile = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`")

// recipe returns the files docs/development.md's recipe for a gear says a
// new gear takes a row in.
func recipe(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, item, ok := strings.Cut(string(b), "\n- **A gear**")
	if !ok {
		t.Fatal("docs/development.md has no recipe for a gear (- **A gear**)")
	}
	item, _, _ = strings.Cut(item, "\n- **")
	var files []string
	for _, m := range recipeFile.FindAllStringSubmatch(item, -1) {
		files = append(files, m[1])
	}
	if len(files) < 5 {
		t.Fatalf("the recipe for a gear names %d files, %v: want its tables'", len(files), files)
	}
	return files
}

// TestAFourthGear adds a gear to state.All in a copy of the tree and
// checks that the compiler stops at every file the recipe for a gear in
// docs/development.md names, and at no other: go build fails in them, and
// every package, type-checked from its source even where a package it
// imports has errors (which go build stops at), fails in them and only
// them. A gear added between two others compiles; then TestGearRows in
// each package fails, naming them.
func TestAFourthGear(t *testing.T) {
	want := recipe(t, root)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}

	t.Run("after heavy", func(t *testing.T) {
		dir := scratch(t, root, "\tModerate\n\tHeavy\n\tSevere\n)", "Moderate, Heavy, Severe}", `Heavy: "heavy", Severe: "severe"}`)
		out, err := goCmd(dir, goBin, "build", "./...")
		if err == nil {
			t.Fatalf("go build passed with a fourth gear that has no rows")
		}
		if extra := slices.DeleteFunc(filesIn(out), func(f string) bool { return slices.Contains(want, f) }); len(extra) > 0 {
			t.Errorf("go build fails in %v, which the recipe does not name:\n%s", extra, out)
		}
		got, err := typeErrors(dir, goBin)
		if err != nil {
			t.Fatal(err)
		}
		if compare(t, "type-checking", want, got) {
			t.Logf("go build ./...:\n%s", out)
		}
	})

	t.Run("between", func(t *testing.T) {
		dir := scratch(t, root, "\tModerate\n\tSevere\n\tHeavy\n)", "Moderate, Severe, Heavy}", `Heavy: "heavy", Severe: "severe"}`)
		if out, err := goCmd(dir, goBin, "build", "./..."); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		pkgs := map[string]bool{} // every package with a TestGearRows
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if bytes.Contains(b, []byte("\nfunc TestGearRows(")) {
				rel, _ := filepath.Rel(dir, filepath.Dir(p))
				pkgs["./"+filepath.ToSlash(rel)] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"test", "-count=1", "-run", "^TestGearRows$"}, slices.Sorted(maps.Keys(pkgs))...)
		out, err := goCmd(dir, goBin, args...)
		if err == nil {
			t.Fatalf("TestGearRows passed with a gear between moderate and heavy that has no rows:\n%s", out)
		}
		var named []string
		for _, m := range rowMissing.FindAllStringSubmatch(out, -1) {
			f := m[1]
			if i := slices.IndexFunc(want, func(w string) bool { return path.Base(w) == m[1] }); i >= 0 {
				f = want[i]
			}
			if !slices.Contains(named, f) {
				named = append(named, f)
			}
		}
		if compare(t, "TestGearRows", want, named) {
			t.Logf("go %s:\n%s", strings.Join(args, " "), out)
		}
	})
}

// compare fails t, and says so, unless got holds the files of want and
// no other.
func compare(t *testing.T, what string, want, got []string) (failed bool) {
	t.Helper()
	for _, f := range want {
		if !slices.Contains(got, f) {
			t.Errorf("%s does not fail in %s, which the recipe names", what, f)
			failed = true
		}
	}
	for _, f := range got {
		if !slices.Contains(want, f) {
			t.Errorf("%s fails in %s, which the recipe does not name", what, f)
			failed = true
		}
	}
	return failed
}

// scratch copies the tree under root (not its hidden folders or
// testdata) to a temporary directory, adds the gear Severe to
// controller/state/types.go there by the three replacements of its
// constants, All and names, and returns the directory.
func scratch(t *testing.T, root string, consts, all, names string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	declared := filepath.Join(dir, "controller", "state", "types.go")
	b, err := os.ReadFile(declared)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for old, new := range map[string]string{"\tModerate\n\tHeavy\n)": consts, "Moderate, Heavy}": all, `Heavy: "heavy"}`: names} {
		if strings.Count(s, old) != 1 {
			t.Fatalf("controller/state/types.go: %q is not there once: how gears are declared has changed", old)
		}
		s = strings.Replace(s, old, new, 1)
	}
	if err := os.WriteFile(declared, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// goCmd runs the go command in dir with the module cache and build cache
// of the tests, and returns its combined output.
func goCmd(dir, goBin string, args ...string) (string, error) {
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// rowMissing matches TestGearRows's word for a table without the gear
// Severe: "chart.go: gear severe has no colour".
var rowMissing = regexp.MustCompile(`([A-Za-z0-9_]+\.go): gear severe `)

// errorAt matches a compiler's error line: "controller/config/rules.go:34:9: …".
var errorAt = regexp.MustCompile(`(?m)^(?:\./)?([A-Za-z0-9_./-]+\.go):\d+:\d+: `)

// filesIn lists the files the compiler's output finds errors in.
func filesIn(out string) []string {
	var files []string
	for _, m := range errorAt.FindAllStringSubmatch(out, -1) {
		if !slices.Contains(files, m[1]) {
			files = append(files, m[1])
		}
	}
	return files
}

// listed is what go list says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Standard   bool
	Export     string
	Module     *struct{ Path string }
}

// typeErrors type-checks every package of the module in dir from its
// source, each against the others as they type-check, errors and all, and
// the rest (the standard library, other modules) from their export data;
// it returns the files (from dir) with an error.
func typeErrors(dir, goBin string) ([]string, error) {
	all, err := goList(dir, goBin, "-e", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles,Standard,Module", "./...")
	if err != nil {
		return nil, err
	}
	var ours, others []string
	for _, p := range all {
		if p.Module != nil && p.Module.Path == module {
			ours = append(ours, p.ImportPath)
		} else if p.ImportPath != "unsafe" {
			others = append(others, p.ImportPath)
		}
	}
	exported, err := goList(dir, goBin, append([]string{"-e", "-export", "-json=ImportPath,Export"}, others...)...)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, p := range exported {
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	gc := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	checked := map[string]*types.Package{}
	imp := importerFunc(func(path string) (*types.Package, error) {
		if p, ok := checked[path]; ok {
			return p, nil
		}
		return gc.Import(path)
	})
	var files []string
	byPath := map[string]listed{}
	for _, p := range all {
		byPath[p.ImportPath] = p
	}
	for _, path := range ours { // go list -deps lists a package after what it imports
		p := byPath[path]
		if len(p.CgoFiles) > 0 {
			return nil, fmt.Errorf("%s uses cgo, which this check cannot type", path)
		}
		var syntax []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			syntax = append(syntax, f)
		}
		conf := types.Config{Importer: imp, Sizes: types.SizesFor("gc", runtime.GOARCH), Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) {
				rel, _ := filepath.Rel(dir, te.Fset.Position(te.Pos).Filename)
				if rel = filepath.ToSlash(rel); !slices.Contains(files, rel) {
					files = append(files, rel)
				}
			}
		}}
		checked[path], _ = conf.Check(path, fset, syntax, nil)
	}
	return files, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// goList runs go list with args in dir and decodes its stream of packages.
func goList(dir, goBin string, args ...string) ([]listed, error) {
	cmd := exec.Command(goBin, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var ps []listed
	dec := json.NewDecoder(bufio.NewReader(bytes.NewReader(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			return ps, nil
		} else if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
}

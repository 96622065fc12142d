package architecture

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gearNamed matches code that names one gear: a State constant or a
// gear's name as a string.
var gearNamed = regexp.MustCompile(`\bstate\.(Light|Moderate|Heavy)\b|"(light|moderate|heavy)"`)

// gearTable matches the lines that may name gears: an element of a table
// indexed by gear (`state.Heavy: …`; compile-guarded where the table's
// length is len(All)), a config key or a JSON field of the contract (a
// struct tag), and a line that says why it must (`// contract:`).
var gearTable = regexp.MustCompile(`(^\s*|[{,]\s*)state\.(Light|Moderate|Heavy)\s*:|\b(yaml|json):"|// contract:`)

// TestGearsAreRows: outside controller/state no code but tests names a
// gear, so that a gear added to All is a row of the tables that the
// compiler points at, not a search through replay, tune and the metrics.
// Light and Heaviest are Lightest and Heaviest there.
func TestGearsAreRows(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// controller/state, and the test support (only tests use it).
			if name := d.Name(); name == ".git" || name == "testdata" || path == filepath.Join(root, "controller", "state") ||
				path == filepath.Join(root, "internal", "testsupport") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if code, _, _ := strings.Cut(line, "//"); gearNamed.MatchString(code) && !gearTable.MatchString(line) {
				t.Errorf("%s:%d names a gear: %s", path, n, strings.TrimSpace(line))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

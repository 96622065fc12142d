// Package golden compares test output with golden files under testdata/,
// and rewrites them when the tests run with -update.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update flag of every test binary that uses this package.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Updating tells whether the tests run with -update.
func Updating() bool { return *update }

// Check compares got with testdata/name, or rewrites that file under -update.
func Check(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs (run with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

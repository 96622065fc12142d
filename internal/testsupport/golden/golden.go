// Package golden compares test output with golden files under testdata/,
// and rewrites them when the tests run with -update.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
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

// CheckBlock compares want with the block of the document at path between
// the lines begin and end (markers that say how the block is generated),
// or rewrites the block under -update. what names the block in messages.
func CheckBlock(tb testing.TB, path, begin, end, what, want string) {
	tb.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		tb.Fatalf("%s has no %q … %q block", path, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	got := text[i+len(begin) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(text[:i+len(begin)]+want+text[j:]), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	tb.Errorf("%s's %s differs from the code's (run with -update):\n--- %s\n%s--- code\n%s", path, what, path, got, want)
}

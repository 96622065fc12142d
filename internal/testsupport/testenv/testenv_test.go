package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that notes how a test would end.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }
func (r *recorder) Skip(args ...any)  { r.skipped = fmt.Sprint(args...) }

func TestNeed(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "tool")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	const want = "no-such-tool not found: run scripts/install-deps.sh (Debian package some-pkg)"
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		if got := Need(r, "tool", "pkg"); got != prog || r.failed != "" || r.skipped != "" {
			t.Errorf("CI=%q: Need(tool) = %q (failed %q, skipped %q), want %q", ci, got, r.failed, r.skipped, prog)
		}
		if got := Need(r, prog, "pkg"); got != prog {
			t.Errorf("CI=%q: Need(%s) = %q", ci, prog, got)
		}
		r = &recorder{TB: t}
		Need(r, "no-such-tool", "some-pkg")
		wantFailed, wantSkipped := "", want
		if ci != "" {
			wantFailed, wantSkipped = want, ""
		}
		if r.failed != wantFailed || r.skipped != wantSkipped {
			t.Errorf("CI=%q: a missing tool failed %q and skipped %q; want failed %q, skipped %q", ci, r.failed, r.skipped, wantFailed, wantSkipped)
		}
	}
}

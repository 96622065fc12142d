package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// needTool returns the path of a program the test needs. When it is
// missing the test fails in CI and is skipped elsewhere, naming the package.
func needTool(tb testing.TB, name, pkg string) string {
	tb.Helper()
	return testenv.Need(tb, name, pkg)
}

// renderMan formats a page as man(1) would show it, in plain text with
// runs of spaces made one, and
// fails on any warning groff gives about the page's roff.
func renderMan(tb testing.TB, page string) string {
	tb.Helper()
	groff := needTool(tb, "groff", "groff-base")
	var out, errb bytes.Buffer
	cmd := exec.Command(groff, "-man", "-Tutf8", "-P-cbou", "-ww", "-rLL=200n", page)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() > 0 {
		tb.Fatalf("groff %s: %v\n%s", filepath.Base(page), err, errb.String())
	}
	// Justified lines pad words apart: compare text, not spacing.
	return regexp.MustCompile(` +`).ReplaceAllString(out.String(), " ")
}

// The manual has a page per command, in section 8, and what the help texts
// say reaches the rendered page: nothing that looks like markup to Markdown
// (<STATUS>, globs, underscores) is swallowed on the way through go-md2man.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runMain(t, "manpages", dir); code != 0 {
		t.Fatalf("manpages: exit %d: %s", code, stderr)
	}
	for _, name := range []string{
		"gearshift.8", "gearshift-run.8", "gearshift-check.8", "gearshift-force.8", "gearshift-sites.8",
		"gearshift-config-check.8", "gearshift-profiles-show.8", "gearshift-completion-bash.8",
	} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("no page %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gearshift-manpages.8")); err == nil {
		t.Error("the hidden manpages command has a page")
	}

	for _, tc := range []struct {
		page string
		want []string
	}{
		{"gearshift.8", []string{
			"GEARSHIFT(8)", "gearshift manual",
			"/etc/gearshift/gearshift.yaml", "EXIT STATUS", "gearshift-check(8)",
		}},
		{"gearshift-check.8", []string{
			"GEARSHIFT-CHECK(8)",
			"GEARSHIFT <STATUS> - <summary> | <perfdata>",
			// Lines of the help that start a new item keep their own line.
			"\n WARNING: a config reload failed",
			"--warn-state",
		}},
		{"gearshift-run.8", []string{"STATUS=gear <state>.", "SIGUSR1 reopens the log file"}},
		{"gearshift-profiles.8", []string{"profiles.<gear>.vcl_file", "(gearshift-<gear>-<8 hex of sha256>)"}},
		{"gearshift-force.8", []string{"gearshift force heavy --for 30m", "--site=\"\" pin the gear of this site alone"}},
		{"gearshift-sites.8", []string{"GEARSHIFT-SITES(8)", `{"sites": [...]}`, "gearshift sites --json"}},
		{"gearshift-purge.8", []string{"--site=\"\" purge this site's pages alone", "gearshift purge --tag product-42 --site shop"}},
	} {
		t.Run(tc.page, func(t *testing.T) {
			got := renderMan(t, filepath.Join(dir, tc.page))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("rendered page lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

// runMain calls Main in-process and returns its exit code and streams.
func runMain(tb testing.TB, args ...string) (code int, stdout, stderr string) {
	tb.Helper()
	var out, errb bytes.Buffer
	code = Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRootExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", []string{"version"}, 0, "gearshift 0.4.0", ""},
		{"unknown command", []string{"bogus"}, 2, "", `unknown command "bogus"`},
		{"mistyped command", []string{"stauts"}, 2, "", `did you mean start or status?`},
		{"unknown flag", []string{"version", "--nope"}, 2, "", "unknown flag: --nope"},
		{"extra argument", []string{"version", "x"}, 2, "", "unknown command"},
		{"completion", []string{"completion", "bash"}, 0, "bash completion", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tc.wantCode, stderr)
			}
			if !strings.Contains(stdout, tc.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout, tc.wantStdout)
			}
			if tc.wantStderr != "" {
				if !strings.Contains(stderr, tc.wantStderr) {
					t.Errorf("stderr = %q, want it to contain %q", stderr, tc.wantStderr)
				}
				if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines != 0 {
					t.Errorf("stderr has %d lines, want one sentence: %q", lines+1, stderr)
				}
			}
		})
	}
}

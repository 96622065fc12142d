package varnishadm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRedact(t *testing.T) {
	secret := []byte("3f2a9c0e5b7d41a68e2f90c1d3b5a7e9\n")
	for _, tc := range []struct {
		name, in, want string
	}{
		{"no secret", "VCL compiled.", "VCL compiled."},
		{"whole", "Line 1:\n3f2a9c0e5b7d41a68e2f90c1d3b5a7e9\n###", "Line 1:\n" + Redacted + "###"},
		{"a token of it", "found: '5b7d41a68e2f' at", "found: '" + Redacted + "' at"},
		{"twice", "x 3f2a9c0e5b7d y 90c1d3b5a7e9", "x " + Redacted + " y " + Redacted},
		{"shorter than the minimum", "see 3f2a9c0 here", "see 3f2a9c0 here"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in, secret); got != tc.want {
				t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if got := Redact("anything at all", nil); got != "anything at all" {
		t.Errorf("no secret: %q", got)
	}
}

// A VCL that includes the -S file makes Varnish quote the secret in its
// compile error; the client's error must not carry it.
func TestVarnishCompileErrorRedactsSecret(t *testing.T) {
	v, c := startVarnish(t)
	ctx := testCtx(t, time.Minute)
	// A copy the VCL compiler (Varnish's unprivileged user) can read. A
	// letter first: a secret starting with a digit and going on with
	// letters trips an assertion in Varnish 7.1's lexer instead of an
	// error quoting the line.
	copyPath := filepath.Join(v.Dir, "secret-copy")
	if err := os.WriteFile(copyPath, append([]byte("gs_"), v.Secret...), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "vcl 4.1;\nbackend default none;\ninclude \"" + copyPath + "\";\n"
	err := c.VCLInline(ctx, "leaky", src, "auto")
	var ce *CLIError
	if !errors.As(err, &ce) {
		t.Fatalf("VCLInline of a VCL including the secret = %v, want a CLIError", err)
	}
	secret := strings.TrimSpace(string(v.Secret))
	for _, text := range []string{err.Error(), ce.Text} {
		for i := 0; i+minRedact <= len(secret); i++ {
			if strings.Contains(text, secret[i:i+minRedact]) {
				t.Fatalf("compile error quotes the secret (%q): %s", secret[i:i+minRedact], text)
			}
		}
	}
	if !strings.Contains(ce.Text, Redacted) {
		t.Errorf("compile error %q does not show where the secret was", ce.Text)
	}
}

package varnishadm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// Tests in this file run against a real varnishd started by varnishtest.

const okVCL = "vcl 4.1;\nbackend default none;\n"

func testCtx(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

func startVarnish(tb testing.TB) (*varnishtest.Varnish, *Client) {
	tb.Helper()
	v := varnishtest.Start(tb, varnishtest.Config{})
	c, err := NewFromFile(v.AdminAddr, v.SecretFile)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return v, c
}

func findVCL(vcls []VCL, name string) (VCL, bool) {
	for _, v := range vcls {
		if v.Name == name {
			return v, true
		}
	}
	return VCL{}, false
}

func TestVarnishAuth(t *testing.T) {
	v, c := startVarnish(t)
	ctx := testCtx(t, 30*time.Second)

	t.Run("secret file with trailing newline", func(t *testing.T) {
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		status, err := c.Status(ctx)
		if err != nil || status != "Child in state running" {
			t.Fatalf("Status = %q, %v", status, err)
		}
		banner, err := c.Banner(ctx)
		if err != nil || !strings.Contains(banner, "varnish-") {
			t.Fatalf("Banner = %q, %v", banner, err)
		}
	})

	wrong := []struct {
		name   string
		secret []byte
	}{
		// Hashing the secret without its trailing newline is the classic
		// client bug: it must fail, not pass by accident.
		{"secret without its trailing newline", bytes.TrimRight(v.Secret, "\n")},
		{"other secret", []byte("not-the-secret\n")},
		{"no secret", nil},
	}
	for _, tc := range wrong {
		t.Run(tc.name, func(t *testing.T) {
			bad := New(v.AdminAddr, tc.secret)
			defer bad.Close()
			err := bad.Ping(ctx)
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("Ping with %s = %v, want ErrAuth", tc.name, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, v.AdminAddr) {
				t.Errorf("error %q does not name the address %s", msg, v.AdminAddr)
			}
			for _, s := range [][]byte{v.Secret, bytes.TrimSpace(v.Secret), tc.secret} {
				if s := strings.TrimSpace(string(s)); s != "" && strings.Contains(msg, s) {
					t.Errorf("error %q contains a secret", msg)
				}
			}
		})
	}
}

func TestVarnishVCLInline(t *testing.T) {
	_, c := startVarnish(t)
	ctx := testCtx(t, 60*time.Second)

	if err := c.VCLInline(ctx, "good", okVCL, "warm"); err != nil {
		t.Fatal(err)
	}
	vcls, err := c.VCLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := findVCL(vcls, "good")
	if !ok || got.Status != "available" || got.State != "warm" || got.Temperature != "warm" {
		t.Fatalf("vcl.list entry for good = %+v (found %v), want available warm warm", got, ok)
	}

	bad := okVCL + "sub vcl_recv { bogus_symbol; }\n"
	err = c.VCLInline(ctx, "bad", bad, "")
	var cliErr *CLIError
	if !errors.As(err, &cliErr) {
		t.Fatalf("VCLInline of broken VCL = %v, want a *CLIError", err)
	}
	if cliErr.Status != 106 || !strings.Contains(cliErr.Text, "VCC-compiler") || !strings.Contains(cliErr.Text, "bogus_symbol") {
		t.Fatalf("CLIError = %d %q, want 106 with the compiler's message", cliErr.Status, cliErr.Text)
	}
	if !strings.Contains(err.Error(), "bogus_symbol") {
		t.Fatalf("error text %q lacks the compiler's message", err)
	}
	// The session survives a command error.
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestVarnishUseListStateDiscard(t *testing.T) {
	_, c := startVarnish(t)
	ctx := testCtx(t, 60*time.Second)

	for _, name := range []string{"one", "two"} {
		if err := c.VCLInline(ctx, name, okVCL, "warm"); err != nil {
			t.Fatal(err)
		}
	}
	active := func() string {
		t.Helper()
		vcls, err := c.VCLList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		name := ""
		for _, v := range vcls {
			if v.Active() {
				if name != "" {
					t.Fatalf("two active VCLs in %+v", vcls)
				}
				name = v.Name
			}
		}
		return name
	}
	if got := active(); got != "boot" {
		t.Fatalf("active = %q, want boot", got)
	}
	if err := c.VCLUse(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if got := active(); got != "one" {
		t.Fatalf("active = %q, want one", got)
	}
	if err := c.VCLUse(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if got := active(); got != "two" {
		t.Fatalf("active = %q, want two", got)
	}

	if err := c.VCLState(ctx, "one", "cold"); err != nil {
		t.Fatal(err)
	}
	vcls, err := c.VCLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if one, _ := findVCL(vcls, "one"); one.State != "cold" {
		t.Fatalf("one after vcl.state cold = %+v", one)
	}
	if err := c.VCLState(ctx, "one", "hot"); err == nil {
		t.Fatal("VCLState with an invalid state succeeded")
	}

	// The active VCL cannot be discarded: Varnish says why (300, CLIS_CANT).
	var cliErr *CLIError
	if err := c.VCLDiscard(ctx, "two"); !errors.As(err, &cliErr) || cliErr.Status != 300 || !strings.Contains(cliErr.Text, "active") {
		t.Fatalf("discard of the active VCL = %v, want CLIError 300", err)
	}
	if err := c.VCLDiscard(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	vcls, err = c.VCLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := findVCL(vcls, "one"); ok && v.Status != "discarded" {
		t.Fatalf("one still listed after discard: %+v", v)
	}
	if err := c.VCLUse(ctx, "one"); !errors.As(err, &cliErr) {
		t.Fatalf("use of a discarded VCL = %v, want a CLIError", err)
	}
}

func TestVarnishReconnectAfterRestart(t *testing.T) {
	v, c := startVarnish(t)
	ctx := testCtx(t, 120*time.Second)

	if err := c.VCLInline(ctx, "before", okVCL, "warm"); err != nil {
		t.Fatal(err)
	}
	if n := c.Sessions(); n != 1 {
		t.Fatalf("Sessions = %d before the restart, want 1", n)
	}
	v.Restart()
	// The idle connection died with the old manager; the client notices
	// and dials the new one.
	vcls, err := c.VCLList(ctx)
	if err != nil {
		t.Fatalf("first command after restart: %v", err)
	}
	if _, ok := findVCL(vcls, "before"); ok {
		t.Fatalf("VCL loaded before the restart survived it: %+v", vcls)
	}
	if err := c.VCLInline(ctx, "after", okVCL, "warm"); err != nil {
		t.Fatal(err)
	}
	if n := c.Sessions(); n != 2 {
		t.Errorf("Sessions = %d after re-dialling the restarted manager, want 2", n)
	}

	v.Kill()
	if err := c.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded with varnishd killed")
	}
	v.Restart()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping after varnishd came back: %v", err)
	}
}

// TestVarnishQuoteRoundTrip sends a VCL full of characters the quoter must
// escape and checks, through Varnish's HTTP side, that the compiler saw
// exactly the bytes that were sent.
func TestVarnishQuoteRoundTrip(t *testing.T) {
	v, c := startVarnish(t)
	ctx := testCtx(t, 60*time.Second)

	// A VCL long string {"..."} takes any byte but NUL literally.
	payload := "quotes \" and \"\" backslash \\ \\n \\\\x41 \\x\n" +
		"newline above, tab\there, CR\r here\n" +
		"non-ASCII: é ü 日本 ✓ — \x7f DEL, \x01 SOH, \xff raw byte\n" +
		"<< EOF and a lone -\n"
	src := okVCL + `
sub vcl_recv { return (synth(200)); }
sub vcl_synth {
	set resp.http.Content-Type = "application/octet-stream";
	synthetic({"` + payload + `"});
	return (deliver);
}
`
	if err := c.VCLInline(ctx, "quoted", src, "warm"); err != nil {
		t.Fatal(err)
	}
	if err := c.VCLUse(ctx, "quoted"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(v.URL("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != payload {
		t.Fatalf("synthetic body through varnish:\n got %q\nwant %q", body, payload)
	}
}

// ChildState follows `stop` and `start` of the cache child.
func TestVarnishChildState(t *testing.T) {
	v, c := startVarnish(t)
	ctx := testCtx(t, 30*time.Second)
	for _, step := range []struct{ cmd, want string }{{"", "running"}, {"stop", "stopped"}, {"start", "running"}} {
		if step.cmd != "" {
			if out, err := v.Adm(step.cmd); err != nil {
				t.Fatalf("varnishadm %s: %v %s", step.cmd, err, out)
			}
		}
		if got, err := c.ChildState(ctx); got != step.want || err != nil {
			t.Errorf("after %q: ChildState = %q, %v; want %q", step.cmd, got, err, step.want)
		}
	}
}

// A vcl.list longer than varnishd's cli_limit (many sites' labels) comes
// back whole: VCLList raises the limit once and asks again.
func TestVarnishListPastCLILimit(t *testing.T) {
	v, c := startVarnish(t)
	ctx := testCtx(t, 60*time.Second)
	if err := c.VCLInline(ctx, "one", okVCL, "warm"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := c.VCLLabel(ctx, fmt.Sprintf("a-rather-long-label-name-%02d", i), "one"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Adm("param.set", "cli_limit", "1k"); err != nil {
		t.Fatal(err)
	}
	vcls, err := c.VCLList(ctx)
	if err != nil || len(vcls) != 22 {
		t.Fatalf("VCLList past cli_limit: %d entries, %v; want boot, one and 20 labels", len(vcls), err)
	}
	if out, _ := v.Adm("param.show", "cli_limit"); !strings.Contains(out, "Value is: 4M") {
		t.Errorf("cli_limit after: %s", out)
	}
}

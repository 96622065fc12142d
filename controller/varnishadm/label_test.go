package varnishadm

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// labelVCL answers every request itself with its own name in a header.
func labelVCL(name string) string {
	return okVCL + `sub vcl_recv { return (synth(200)); }
sub vcl_synth { set resp.http.X-VCL = "` + name + `"; return (deliver); }
`
}

// TestVarnishLabel points a label at one VCL and then another while the
// active VCL hands every request to it, as gearshift's label mode does.
func TestVarnishLabel(t *testing.T) {
	v, c := startVarnish(t)
	ctx := testCtx(t, 60*time.Second)
	for _, name := range []string{"one", "two"} {
		if err := c.VCLInline(ctx, name, labelVCL(name), "warm"); err != nil {
			t.Fatal(err)
		}
	}
	// A VCL that names a label does not compile until the label exists.
	site := okVCL + "sub vcl_recv { return (vcl(gs)); }\n"
	var cliErr *CLIError
	if err := c.VCLInline(ctx, "site", site, ""); !errors.As(err, &cliErr) {
		t.Fatalf("site VCL before its label exists = %v, want a CLIError", err)
	}
	if err := c.VCLLabel(ctx, "gs", "one"); err != nil {
		t.Fatal(err)
	}
	if err := c.VCLInline(ctx, "site", site, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.VCLUse(ctx, "site"); err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(v.URL("/"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("X-VCL")
	}
	if got := served(); got != "one" {
		t.Fatalf("served by %q, want one", got)
	}
	if err := c.VCLLabel(ctx, "gs", "two"); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "two" {
		t.Fatalf("after relabel, served by %q, want two", got)
	}

	vcls, err := c.VCLList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gs, _ := findVCL(vcls, "gs")
	if !gs.IsLabel() || gs.LabelOf != "two" || gs.LabelRefs != 1 {
		t.Errorf("label in vcl.list = %+v, want a label of two used by one VCL", gs)
	}
	if one, _ := findVCL(vcls, "one"); one.Labels != 0 || one.IsLabel() {
		t.Errorf("one after relabel = %+v, want no label", one)
	}

	// What Varnish refuses: discarding a labelled VCL or a label in use,
	// labelling a cold VCL.
	if err := c.VCLDiscard(ctx, "two"); !errors.As(err, &cliErr) || !strings.Contains(cliErr.Text, "label") {
		t.Errorf("discard of the labelled VCL = %v, want a CLIError about the label", err)
	}
	if err := c.VCLDiscard(ctx, "gs"); !errors.As(err, &cliErr) {
		t.Errorf("discard of a label the active VCL uses = %v, want a CLIError", err)
	}
	if err := c.VCLState(ctx, "one", "cold"); err != nil {
		t.Fatal(err)
	}
	if err := c.VCLLabel(ctx, "gs", "one"); !errors.As(err, &cliErr) || !strings.Contains(cliErr.Text, "cold") {
		t.Errorf("label of a cold VCL = %v, want a CLIError about cold", err)
	}
	if err := c.VCLDiscard(ctx, "one"); err != nil {
		t.Errorf("discard of the VCL the label left = %v", err)
	}
}

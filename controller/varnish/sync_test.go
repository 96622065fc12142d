package varnish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// First contact loads the three profiles and switches; in sync nothing is
// sent; a shift is one vcl.use.
func TestSyncLoadsThenSwitches(t *testing.T) {
	r := newRig(t, nil)
	if ts := r.status(state.Light); ts.Reachable || !strings.HasPrefix(ts.Error, "not contacted yet") {
		t.Errorf("target before the first sync = %+v, want unreachable, not contacted yet", ts)
	}
	if _, switched := r.sync(t, state.Light); !switched {
		t.Error("the first sync did not switch")
	}
	r.wantActive(t, state.Light)
	if got := r.cmds.take(); len(got) != 4 {
		t.Errorf("first contact sent %v, want 3 vcl.inline and 1 vcl.use", got)
	}
	if _, switched := r.sync(t, state.Light); switched {
		t.Error("an in-sync target switched")
	}
	if got := r.cmds.take(); len(got) != 0 {
		t.Errorf("in-sync sync sent %v, want nothing", got)
	}
	ms, switched := r.sync(t, state.Heavy)
	r.wantActive(t, state.Heavy)
	if got := r.cmds.take(); len(got) != 1 || !strings.HasPrefix(got[0], "use ") {
		t.Errorf("switch sent %v, want one vcl.use", got)
	}
	if ts := r.status(state.Heavy); !switched || ms <= 0 || ts.LastSwitchMS != ms {
		t.Errorf("switch returned %v ms (switched %v), status %+v", ms, switched, ts)
	}
}

func TestSyncReconcilesAfterManagerRestart(t *testing.T) {
	r := newRig(t, nil)
	r.sync(t, state.Moderate)
	r.wantActive(t, state.Moderate)

	r.cmds.take()
	r.v.Restart() // every loaded VCL is gone; boot is active
	r.sync(t, state.Moderate)
	r.wantActive(t, state.Moderate)
	// The gear that should serve first, then the other two: one compile
	// before the right gear is active, not three.
	want := []string{"inline " + r.set[state.Moderate].Name, "use " + r.set[state.Moderate].Name,
		"inline " + r.set[state.Light].Name, "inline " + r.set[state.Heavy].Name}
	if got := r.cmds.take(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after the restart sent %v, want %v", got, want)
	}
	r.sync(t, state.Moderate)
	r.wantActive(t, state.Moderate)
	if r.logged("active VCL changed outside gearshift") != 0 {
		t.Error("a manager restart was reported as a foreign vcl.use")
	}
}

func TestSyncUndoesForeignVCLUse(t *testing.T) {
	r := newRig(t, nil)
	r.sync(t, state.Light)
	r.wantActive(t, state.Light)

	if at := r.status(state.Light).ForeignVCLAt; at != nil {
		t.Errorf("foreign_vcl_at = %v before any foreign change", at)
	}
	if _, err := r.v.Adm("vcl.use", "boot"); err != nil {
		t.Fatal(err)
	}
	when := r.now
	r.sync(t, state.Light)
	r.wantActive(t, state.Light)
	entries := r.logs.FilterMessage("active VCL changed outside gearshift").All()
	if len(entries) != 1 {
		t.Fatalf("want one warning %q, logs: %v", "active VCL changed outside gearshift", r.logs.All())
	}
	if hint, _ := entries[0].ContextMap()["hint"].(string); !strings.Contains(hint, "varnish.mode: label") {
		t.Errorf("the warning does not say how to use label mode: hint %q", hint)
	}
	if at := r.status(state.Light).ForeignVCLAt; at == nil || !at.Equal(when) {
		t.Errorf("foreign_vcl_at = %v, want %v", at, when)
	}
}

func TestSyncDiscardsOnlyStaleOwnVCLs(t *testing.T) {
	r := newRig(t, nil)
	path := filepath.Join(r.v.Dir, "other.vcl")
	if err := os.WriteFile(path, []byte(varnishtest.DefaultVCL), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gearshift-light-deadbeef", "mine", "gearshift-check-0000"} {
		if _, err := r.v.Adm("vcl.load", name, path); err != nil {
			t.Fatal(err)
		}
	}
	r.sync(t, state.Light)
	r.wantActive(t, state.Light)
	names, _ := r.vcls(t)
	if names["gearshift-light-deadbeef"] {
		t.Error("stale gearshift-light-deadbeef not discarded")
	}
	for _, keep := range []string{"mine", "boot", "gearshift-check-0000"} {
		if !names[keep] {
			t.Errorf("%s was discarded; gearshift must not touch VCLs it does not own", keep)
		}
	}
}

// A varnishd restarted with a new -S secret is reached again: the refused
// secret is read anew from its file for the next dial, and the session that
// follows is a reconnect, not a foreign change.
func TestSyncRereadsAChangedSecret(t *testing.T) {
	r := newRig(t, nil)
	r.sync(t, state.Moderate)
	r.wantActive(t, state.Moderate)

	if err := os.WriteFile(r.v.SecretFile, []byte("a new secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.v.Restart()
	r.sync(t, state.Moderate)
	if ts := r.status(state.Moderate); ts.Reachable || !strings.Contains(ts.Error, "authentication failed") {
		t.Fatalf("target with the old secret = %+v, want unreachable, authentication failed", ts)
	}
	r.now = r.now.Add(MaxBackoff)
	r.sync(t, state.Moderate)
	r.wantActive(t, state.Moderate)
	if r.logged("varnish reachable again") != 1 {
		t.Errorf("want one %q entry", "varnish reachable again")
	}
	if r.logged("active VCL changed outside gearshift") != 0 {
		t.Error("the new session was reported as a foreign vcl.use")
	}
}

// A Varnish without varnish-modules refuses the profiles; the target runs
// their Plain twins, says so once, and shifts as any other.
func TestSyncWithoutModules(t *testing.T) {
	r := newRigOn(t, varnishtest.Start(t, varnishtest.Config{Params: []string{varnishtest.WithoutModules(t)}}), nil)
	for _, st := range []state.Gear{state.Moderate, state.Heavy} {
		r.sync(t, st)
		plain, ok := r.set[st].Plain()
		if !ok {
			t.Fatalf("%s has no Plain twin", st)
		}
		if _, active := r.vcls(t); active != plain.Name {
			t.Fatalf("active VCL = %q, want %s's Plain twin %q (status %+v)", active, st, plain.Name, r.status(st))
		}
		if ts := r.status(st); !ts.InSync || ts.Error != "" {
			t.Fatalf("status = %+v, want %s in sync", ts, st)
		}
	}
	if n := r.logs.FilterMessageSnippet("varnish-modules (xkey, vsthrottle) are missing").Len(); n != 1 {
		t.Errorf("said %d times that the modules are missing, want once", n)
	}
	names, _ := r.vcls(t)
	for _, p := range r.set {
		if names[p.Name] {
			t.Errorf("%s with varnish-modules is loaded: %v", p.Name, names)
		}
	}
}

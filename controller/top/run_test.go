package top

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
)

// fakeVarnishlog writes a program that prints the fixture log, then runs
// script (shell), standing in for varnishlog.
func fakeVarnishlog(tb testing.TB, script string) string {
	tb.Helper()
	fixture, err := filepath.Abs(filepath.Join("testdata", "varnishlog.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	prog := filepath.Join(tb.TempDir(), "varnishlog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ncat "+fixture+"\n"+script+"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return prog
}

func TestScreenRun(t *testing.T) {
	var out bytes.Buffer
	s := Screen{Log: Log{Name: "site", Binary: fakeVarnishlog(t, "exec sleep 30")}, By: ByURL, For: 1500 * time.Millisecond, Out: &out}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.HasPrefix(got, "gearshift top site: ") || !strings.Contains(got, "POST /xmlrpc.php") || strings.Contains(got, "\x1b[") {
		t.Errorf("screen:\n%s\nwant screens of the fixture's requests, without terminal codes", got)
	}
}

func TestWatchFails(t *testing.T) {
	l := Log{Name: "site", Binary: fakeVarnishlog(t, "echo 'VSM: Could not get hold of varnishd, is it running?' >&2; exit 1")}
	n := 0
	err := l.Watch(context.Background(), func(Request) { n++ })
	if err == nil || !strings.Contains(err.Error(), "varnishlog -n site") || !strings.Contains(err.Error(), "is it running?") {
		t.Errorf("Watch = %v, want varnishlog's complaint", err)
	}
	if n != 5 {
		t.Errorf("%d requests before the failure, want the fixture's 5", n)
	}
}

func TestTargetName(t *testing.T) {
	targets := []config.Target{{Admin: "a"}, {Admin: "b", Name: "site"}, {Admin: "c", Name: "other"}}
	for _, tc := range []struct{ want, got, err string }{
		{"", "site", ""},
		{"other", "other", ""},
		{"none", "", `no Varnish target is named "none"`},
	} {
		got, err := TargetName(targets, tc.want)
		if got != tc.got || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("TargetName(%q) = %q, %v; want %q, %q", tc.want, got, err, tc.got, tc.err)
		}
	}
	if _, err := TargetName(targets[:1], ""); err == nil {
		t.Error("TargetName without names: no error")
	}
}

package varnishtest

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

func TestStartRestart(t *testing.T) {
	v := Start(t, Config{})
	out, err := v.Adm("status")
	if err != nil || !strings.Contains(out, "running") {
		t.Fatalf("status = %q, %v", out, err)
	}
	if _, err := v.Adm(`vcl.inline extra "vcl 4.1; backend default none;"`); err != nil {
		t.Fatal(err)
	}
	v.Restart()
	out, err = v.Adm("vcl.list")
	if err != nil || strings.Contains(out, "extra") {
		t.Fatalf("after restart vcl.list = %q, %v; want boot only", out, err)
	}
	resp, err := http.Get(v.URL("/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("GET / = %d, want 503 from backend none", resp.StatusCode)
	}
}

// A port taken between FreeAddr and varnishd's start is told apart from
// other failures, so that Start can try new ports.
func TestPortTaken(t *testing.T) {
	v := prepare(t, Config{})
	t.Cleanup(v.Kill)
	l, err := net.Listen("tcp", v.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	err = v.tryStart()
	l.Close()
	if !errors.Is(err, errPortTaken) {
		t.Fatalf("start on a taken port: %v, want errPortTaken", err)
	}
	v.HTTPAddr = testenv.FreeAddr(t)
	if err := v.tryStart(); err != nil {
		t.Fatalf("start on new ports: %v", err)
	}
}

package sensor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// TestBackendHealthAgainstVarnish: backend_healthy follows the probe of
// a real varnishd's gearshift_probe backend, sick and healthy again.
func TestBackendHealthAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	var sick atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sick.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	v := varnishtest.Start(t, varnishtest.Config{VCL: fmt.Sprintf(`vcl 4.1;
import std;
backend default { .host = %[1]q; .port = %[2]q; }
backend gearshift_probe {
    .host = %[1]q; .port = %[2]q;
    .probe = { .url = "/"; .interval = 100ms; .timeout = 100ms; .window = 3; .threshold = 2; }
}
sub vcl_recv { if (!std.healthy(gearshift_probe)) { return (synth(503)); } }
`, host, port)})
	src, err := healthSource.Open(HostConfig{BackendProbe: true, Admins: []AdminTarget{{Addr: v.AdminAddr, SecretFile: v.SecretFile}}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() (float64, bool) {
		apply, err := src.Read(context.Background())
		if err != nil || apply == nil {
			t.Logf("read: %v", err)
			return 0, false
		}
		s := &Sample{Values: map[string]float64{}}
		apply(s)
		v, ok := s.Values[BackendHealthy]
		return v, ok
	}
	wait := func(want float64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got, ok := read(); ok && got == want {
				return
			}
		}
		t.Fatalf("backend_healthy never became %v", want)
	}
	wait(1)
	sick.Store(true)
	wait(0)
	sick.Store(false)
	wait(1)
}

func TestParseProbeHealth(t *testing.T) {
	for _, tc := range []struct {
		out     string
		healthy bool
		err     bool
	}{
		{`[2, ["backend.list", "-j"], 1700000000.0, {"v1.gearshift_probe": {"type": "backend", "probe_message": [3, 5, "healthy"]}}]`, true, false},
		{`[2, ["backend.list", "-j"], 1700000000.0, {"v1.gearshift_probe": {"probe_message": [0, 5, "sick"]}, "v2.gearshift_probe": {"probe_message": [1, 5, "sick"]}}]`, false, false},
		{`[2, ["backend.list", "-j"], 1700000000.0, {"v1.gearshift_probe": {"probe_message": [0, 5, "sick"]}, "v2.gearshift_probe": {"probe_message": [5, 5, "healthy"]}}]`, true, false},
		{`[2, ["backend.list", "-j"], 1700000000.0, {}]`, false, true},
		{`not json`, false, true},
	} {
		got, err := parseProbeHealth(tc.out)
		if got != tc.healthy || (err != nil) != tc.err {
			t.Errorf("parseProbeHealth(%.60q) = %v, %v; want %v, error %v", tc.out, got, err, tc.healthy, tc.err)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/internal/testsupport/apitest"
)

// serveStatus serves canned /v1/status JSON on a unix socket in dir.
func serveStatus(tb testing.TB, socket string, st *api.Status) {
	tb.Helper()
	l, err := net.Listen("unix", socket)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": "no such endpoint"})
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	srv.Listener = l
	srv.Start()
	tb.Cleanup(srv.Close)
}

// The command end to end, in process: config → socket → line and exit code.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("x\n"), 0o600)
	socket := filepath.Join(dir, "gs.sock")
	cfgPath := filepath.Join(dir, "gearshift.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf("varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: %s } ] }\ncontrol: { socket: %s }\npid_file: %s/gs.pid\n", secret, socket, dir)), 0o644)

	code, stdout, _ := runMain(t, "check", "--config", cfgPath)
	if code != 2 || !strings.HasPrefix(stdout, "GEARSHIFT CRITICAL - daemon not running (no answer on "+socket) {
		t.Errorf("no daemon: exit %d, %q", code, stdout)
	}

	st := apitest.HealthyStatus()
	st.Since = time.Now().Add(-time.Minute)
	st.Sample.Time = time.Now()
	serveStatus(t, socket, st)
	code, stdout, stderr := runMain(t, "check", "--config", cfgPath)
	if code != 0 || !strings.HasPrefix(stdout, "GEARSHIFT OK - gear moderate (auto, 1m): load_per_cpu 0.82 >= 0.70 for 3 samples | 'load_per_cpu'=0.82;;;0 'mem_available'=41.3%;;;0;100 'psi_cpu'=12.5%;;;0;100 'psi_mem'=0%;;;0;100 'state'=1;;;0;2 'switch_ms'=0.41ms;;;0 'sample_age'=") {
		t.Errorf("daemon up: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runMain(t, "check", "--config", cfgPath, "--quiet")
	if code != 0 || stdout != "" {
		t.Errorf("--quiet when OK: exit %d, %q", code, stdout)
	}
	code, stdout, _ = runMain(t, "check", "--config", cfgPath, "--warn-state", "light", "--warn-state", "moderate")
	if code != 1 || !strings.HasPrefix(stdout, "GEARSHIFT WARNING - gear is moderate; gear moderate (auto") {
		t.Errorf("--warn-state: exit %d, %q", code, stdout)
	}

	// A monitoring agent may not read the admin secret: not the check's business.
	noSecret := filepath.Join(dir, "no-secret.yaml")
	os.WriteFile(noSecret, []byte(fmt.Sprintf("varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: %s/absent } ] }\ncontrol: { socket: %s }\n", dir, socket)), 0o644)
	if code, stdout, _ := runMain(t, "check", "--config", noSecret); code != 0 {
		t.Errorf("unreadable secret: exit %d, %q; want OK", code, stdout)
	}
	// A file edited into something the next start would refuse: WARNING.
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte(fmt.Sprintf("control: { socket: %s }\ncpus: -1\n", socket)), 0o644)
	want := "GEARSHIFT WARNING - config " + broken + " does not validate, the next start or reload will fail: cpus: must be 0 (detect) or a number of CPUs, got -1 (line 2); gear moderate"
	if code, stdout, _ := runMain(t, "check", "--config", broken); code != 1 || !strings.HasPrefix(stdout, want) {
		t.Errorf("invalid config file: exit %d,\n%s\nwant\n%s", code, stdout, want)
	}
}

// A config path that is no config file, endless (/dev/zero), is read only
// up to the config size bound and reported, not read into memory.
func TestCheckEndlessConfig(t *testing.T) {
	code, stdout, stderr := runMain(t, "check", "--config", "/dev/zero")
	if code == 0 || !strings.Contains(stdout, "config /dev/zero is larger than 1 MiB") {
		t.Errorf("check --config /dev/zero: exit %d, stdout %q, stderr %q; want the size refusal", code, stdout, stderr)
	}
}

func TestCheckBadFlagsAreUnknown(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--timeout", "soon"},
		{"check", "--nope"},
		{"check", "--warn-state", "turbo"},
		{"check", "--timeout", "0s"},
		{"check", "extra"},
	} {
		code, stdout, stderr := runMain(t, args...)
		if code != 3 {
			t.Errorf("%q: exit %d, want 3 (UNKNOWN); stdout %q stderr %q", args, code, stdout, stderr)
		}
		if !strings.HasPrefix(stdout, "GEARSHIFT UNKNOWN - ") || stderr != "" {
			t.Errorf("%q: output %q %q, want a GEARSHIFT UNKNOWN line", args, stdout, stderr)
		}
	}
}

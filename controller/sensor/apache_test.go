package sensor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

func TestParseApacheStatus(t *testing.T) {
	tests := []struct {
		name      string
		file      string // under testdata/apache, or text
		text      string
		busy      int
		slots     int
		wantError string
	}{
		// Real pages of Apache 2.4.71: the default ServerLimit gives prefork
		// 256 slots, event 16 processes of 25 threads.
		{name: "prefork, idle", file: "prefork-idle.txt", busy: 1, slots: 256},
		{name: "event, idle", file: "event-idle.txt", busy: 1, slots: 400},
		{name: "prefork, busy", file: "prefork-busy.txt", busy: 4, slots: 8},
		{name: "open slots count", text: "BusyWorkers: 2\nIdleWorkers: 1\nScoreboard: WW_.\n", busy: 2, slots: 4},
		{name: "CRLF line ends", text: "BusyWorkers: 3\r\nScoreboard: WWW_\r\n", busy: 3, slots: 4},
		{name: "HTML page", text: "<html><body><h1>Apache Server Status</h1></body></html>\n", wantError: "not a mod_status ?auto page"},
		{name: "no scoreboard", text: "BusyWorkers: 2\nIdleWorkers: 1\n", wantError: "no Scoreboard line"},
		{name: "no busy workers", text: "Scoreboard: __W\n", wantError: "no BusyWorkers line"},
		{name: "bad count", text: "BusyWorkers: many\nScoreboard: __W\n", wantError: `BusyWorkers "many" is not a count`},
		{name: "more busy than slots", text: "BusyWorkers: 5\nScoreboard: __W\n", wantError: "exceeds the scoreboard's 3 slots"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.text
			if tc.file != "" {
				b, err := os.ReadFile(filepath.Join("testdata/apache", tc.file))
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			}
			busy, slots, err := parseApacheStatus(text)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("parseApacheStatus: error %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			if err != nil || busy != tc.busy || slots != tc.slots {
				t.Errorf("parseApacheStatus = %d, %d, %v; want %d, %d", busy, slots, err, tc.busy, tc.slots)
			}
		})
	}
}

func TestNewApacheStatus(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "http://127.0.0.1/server-status?auto", want: "http://127.0.0.1/server-status?auto"},
		{in: "http://127.0.0.1:8080/server-status", want: "http://127.0.0.1:8080/server-status?auto"},
		{in: "https://www.example.com/status?x=1", want: "https://www.example.com/status?x=1&auto"},
		{in: "127.0.0.1/server-status", wantErr: `apache status URL "127.0.0.1/server-status": want http://host[:port]/server-status?auto`},
		{in: "ftp://127.0.0.1/server-status", wantErr: "want http://"},
		{in: "http://admin:s3cret@127.0.0.1/server-status", want: "http://admin:xxxxx@127.0.0.1/server-status?auto"},
		{in: "ftp://admin:s3cret@127.0.0.1/", wantErr: `"ftp://admin:xxxxx@127.0.0.1/"`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			a, err := NewApacheStatus(tc.in, 0)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewApacheStatus: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || a.URL() != tc.want {
				t.Errorf("NewApacheStatus = %v, %v; want %s", a, err, tc.want)
			}
		})
	}
}

func TestApacheStatusBounds(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{
			name:    "not found",
			handler: func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
			wantErr: "404 Not Found",
		},
		{
			// Varnish answers a status page 403 with X-Varnish (the
			// profiles never serve one): the error says what to fix.
			name: "through Varnish",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Varnish", "32770")
				http.Error(w, "Status pages are not served through Varnish", http.StatusForbidden)
			},
			wantErr: "goes through Varnish, which never serves status pages: point sensor.apache_status at Apache's own port",
		},
		{
			name: "endless page",
			handler: func(w http.ResponseWriter, r *http.Request) {
				chunk := []byte(strings.Repeat("Scoreboard: ", 1000))
				for i := 0; i < 1000; i++ {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			},
			wantErr: "page larger than",
		},
		{
			name: "stalls",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			},
			wantErr: "Timeout",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			a, err := NewApacheStatus(srv.URL+"/server-status", 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.BusyRatio(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("BusyRatio = %v, %v; want an error containing %q", got, err, tc.wantErr)
			}
		})
	}
}

// apacheBinary returns apache2's path; missing, it fails the test in CI and
// skips it elsewhere.
func apacheBinary(tb testing.TB) string {
	tb.Helper()
	return testenv.Need(tb, "apache2", "apache2")
}

// startApache starts a private prefork Apache on a free loopback port with
// mod_status at /server-status and slots scoreboard slots, and stops it in
// Cleanup. It returns the address.
func startApache(tb testing.TB, slots int) string {
	tb.Helper()
	bin := apacheBinary(tb)
	dir := tb.TempDir()
	addr := testenv.FreeAddr(tb)
	user := ""
	if os.Getuid() == 0 {
		user = "User www-data\nGroup www-data\n" // Apache refuses to serve as root
	}
	conf := fmt.Sprintf(`ServerRoot "%[1]s"
ServerName 127.0.0.1
Listen %[2]s
PidFile "%[1]s/apache.pid"
DefaultRuntimeDir "%[1]s"
Mutex file:%[1]s default
ErrorLog "%[1]s/error.log"
%[3]s
LoadModule mpm_prefork_module /usr/lib/apache2/modules/mod_mpm_prefork.so
LoadModule authz_core_module  /usr/lib/apache2/modules/mod_authz_core.so
LoadModule authz_host_module  /usr/lib/apache2/modules/mod_authz_host.so
LoadModule status_module      /usr/lib/apache2/modules/mod_status.so
StartServers       %[4]d
MinSpareServers    1
MaxSpareServers    %[4]d
ServerLimit        %[4]d
MaxRequestWorkers  %[4]d
Timeout            30
<Location "/server-status">
    SetHandler server-status
    Require ip 127.0.0.1
</Location>
`, dir, addr, user, slots)
	confPath := filepath.Join(dir, "apache.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	out, err := os.OpenFile(filepath.Join(dir, "error.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(bin, "-f", confPath, "-DFOREGROUND")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start apache2: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	// No keep-alive: a kept connection would hold a worker, counted busy.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			tb.Fatalf("apache2 exited at start:\n%s", log)
		default:
		}
		resp, err := client.Get("http://" + addr + "/server-status?auto")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			tb.Fatalf("apache2 did not answer on %s within 15s:\n%s", addr, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestApacheStatusAgainstApache(t *testing.T) {
	const slots = 8
	addr := startApache(t, slots)
	a, err := NewApacheStatus("http://"+addr+"/server-status", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Idle, the only busy worker is the one serving the status page (once
	// the one that answered the readiness check has closed).
	waitRatio := func(want float64) {
		t.Helper()
		var got float64
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if got, err = a.BusyRatio(ctx); err != nil {
				t.Fatalf("BusyRatio: %v", err)
			}
			if got == want {
				return
			}
		}
		t.Errorf("BusyRatio = %v, want %v", got, want)
	}
	waitRatio(1.0 / slots)

	// Clients that send half a request hold a worker each, reading.
	const held = 3
	for i := 0; i < held; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	waitRatio(float64(held+1) / slots)
}

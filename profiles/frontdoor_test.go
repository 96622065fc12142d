package profiles

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/frontdoor"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// frontDoor is a TLS terminator in front of the gears' varnishd.
type frontDoor struct {
	name string
	addr string // its TLS listener
}

// hitchDoor starts Debian's hitch on a free port, speaking PROXY v2 to
// g's PROXY listener.
func hitchDoor(t *testing.T, g *gears) frontDoor {
	return frontDoor{"hitch", frontdoor.StartHitch(t, g.v.ProxyAddr)}
}

// nginxDoor starts Debian's nginx on a free port, terminating TLS and
// proxying to g's HTTP listener with X-Forwarded-For and -Proto.
func nginxDoor(t *testing.T, g *gears) frontDoor {
	dir := t.TempDir()
	_, cert, key := frontdoor.SelfSigned(t, dir)
	addr := testenv.FreeAddr(t)
	conf := filepath.Join(dir, "nginx.conf")
	text := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen %[2]s ssl;
        ssl_certificate %[3]s;
        ssl_certificate_key %[4]s;
        location / {
            proxy_pass http://%[5]s;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
        }
    }
}
`, dir, addr, cert, key, g.v.HTTPAddr)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	frontdoor.StartTerminator(t, addr, testenv.Need(t, "nginx", "nginx-light"), "-p", dir, "-c", conf)
	return frontDoor{"nginx", addr}
}

// apacheDoor starts Debian's Apache with mod_ssl and mod_proxy on a free
// port, terminating TLS and proxying to g's HTTP listener (mod_proxy adds
// X-Forwarded-For; X-Forwarded-Proto is set).
func apacheDoor(t *testing.T, g *gears) frontDoor {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	_, cert, key := frontdoor.SelfSigned(t, dir)
	addr := testenv.FreeAddr(t)
	users := ""
	if os.Geteuid() == 0 {
		users = "User www-data\nGroup www-data"
	}
	mods := "/usr/lib/apache2/modules"
	conf := filepath.Join(dir, "apache.conf")
	text := fmt.Sprintf(`ServerRoot %[1]q
ServerName 127.0.0.1
Listen %[2]s
PidFile %[1]s/apache.pid
DefaultRuntimeDir %[1]s
Mutex file:%[1]s default
ErrorLog %[1]s/error.log
%[6]s
LoadModule mpm_event_module     %[3]s/mod_mpm_event.so
LoadModule authz_core_module    %[3]s/mod_authz_core.so
LoadModule headers_module       %[3]s/mod_headers.so
LoadModule socache_shmcb_module %[3]s/mod_socache_shmcb.so
LoadModule ssl_module           %[3]s/mod_ssl.so
LoadModule proxy_module         %[3]s/mod_proxy.so
LoadModule proxy_http_module    %[3]s/mod_proxy_http.so
SSLEngine on
SSLCertificateFile %[4]q
SSLCertificateKeyFile %[5]q
ProxyPreserveHost On
RequestHeader set X-Forwarded-Proto https
ProxyPass / http://%[7]s/
`, dir, addr, mods, cert, key, users, g.v.HTTPAddr)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	frontdoor.StartTerminator(t, addr, testenv.Need(t, "apache2", "apache2"), "-f", conf, "-DFOREGROUND")
	return frontDoor{"apache", addr}
}

// get sends one request over TLS through the door from the visitor's
// address ip, routed to gear.
func (d frontDoor) get(t *testing.T, ip, gear, method, path string) reply {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", d.addr, &tls.Config{InsecureSkipVerify: true, ServerName: "example.org"})
	if err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: example.org\r\nX-Test-Gear: %s\r\nConnection: close\r\n\r\n", method, path, gear)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s through %s: %v", method, path, d.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// TestFrontDoorsAgainstVarnish puts Debian's hitch (PROXY v2), nginx and
// Apache mod_ssl + mod_proxy (X-Forwarded-For and -Proto) in front of the
// profiles, with a
// self-signed certificate, and visitors on loopback addresses of their
// own: each visitor is known and budgeted as itself, cannot PURGE or read
// a status page, and the backend learns the scheme, which is part of the
// cache key (an https visitor never gets the http copy).
func TestFrontDoorsAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	site := testConfig(o)
	site.Options.ClientBudget = Budget{Rate: 0.1, Burst: 3}
	g := loadGearsOn(t, varnishtest.Config{Proxy: true}, map[string]string{
		"heavy":    render(t, site, state.Heavy),
		"moderate": render(t, site, state.Moderate),
	})
	for i, door := range []frontDoor{hitchDoor(t, g), nginxDoor(t, g), apacheDoor(t, g)} {
		visitor, other := fmt.Sprintf("127.0.0.%d", 60+2*i), fmt.Sprintf("127.0.0.%d", 61+2*i)
		t.Run(door.name, func(t *testing.T) {
			u := "/g/heavy/" + door.name + "/scheme?cc=max-age%3D600"
			if r := door.get(t, visitor, "heavy", "GET", u); r.status != http.StatusOK {
				t.Fatalf("GET %s over https: status %d", u, r.status)
			}
			if p := o.header(u, "X-Forwarded-Proto"); p != "https" {
				t.Errorf("the backend got X-Forwarded-Proto %q, want https", p)
			}
			if f := o.header(u, "X-Forwarded-For"); !strings.HasPrefix(f, visitor) {
				t.Errorf("the backend got X-Forwarded-For %q, want the visitor %s first", f, visitor)
			}
			if door.name == "hitch" {
				// A visitor on hitch's own address (curl on the host):
				// PROXY v2's TLS flag still tells its scheme.
				local := "/g/heavy/hitch/local?cc=max-age%3D600"
				if r := door.get(t, "127.0.0.1", "heavy", "GET", local); r.status != http.StatusOK {
					t.Fatalf("GET %s over https from 127.0.0.1: status %d", local, r.status)
				}
				if p := o.header(local, "X-Forwarded-Proto"); p != "https" {
					t.Errorf("a visitor on hitch's own address: the backend got X-Forwarded-Proto %q, want https", p)
				}
			}
			if r := door.get(t, visitor, "heavy", "GET", u); r.header.Get("X-Cache") != "HIT" {
				t.Errorf("a second https view: X-Cache %s, want HIT", r.header.Get("X-Cache"))
			}
			// Plain http, straight to Varnish: another copy.
			if r := rawFrom(t, g, "127.0.0.2", "heavy", "GET "+u+" HTTP/1.1\r\nHost: example.org\r\n"); r.header.Get("X-Cache") == "HIT" {
				t.Errorf("an http visitor got the https copy")
			}
			wantCount(t, o, u, 2)

			for _, m := range []string{"PURGE", "BAN"} {
				if r := door.get(t, visitor, "heavy", m, u); r.status < 400 {
					t.Errorf("%s through %s from a visitor: status %d, want refused", m, door.name, r.status)
				}
			}
			if r := door.get(t, visitor, "heavy", "GET", u); r.header.Get("X-Cache") != "HIT" {
				t.Errorf("after the refused PURGE: X-Cache %s, want the copy still there", r.header.Get("X-Cache"))
			}
			for _, p := range []string{"/server-status", "/server-info?config"} {
				if r := door.get(t, "127.0.0.1", "heavy", "GET", p); r.status != http.StatusForbidden {
					t.Errorf("GET %s through %s from loopback: status %d, want 403", p, door.name, r.status)
				}
			}
			// Each visitor has a budget of its own (3 misses at once).
			spent := 0
			for n := range 6 {
				if r := door.get(t, visitor, "moderate", "GET", fmt.Sprintf("/g/moderate/%s/miss/%d", door.name, n)); r.status == http.StatusTooManyRequests {
					spent++
				}
			}
			if spent == 0 {
				t.Errorf("6 misses at once from one visitor through %s: none refused, want its budget of 3 to hold", door.name)
			}
			if r := door.get(t, other, "moderate", "GET", "/g/moderate/"+door.name+"/other"); r.status != http.StatusOK {
				t.Errorf("another visitor through %s: status %d, want 200 (a budget of its own)", door.name, r.status)
			}
		})
	}
}

// TestFPMStatusPathsAgainstVarnish: the status paths of the PHP-FPM pools
// gearshift reads are never answered through Varnish, however written;
// a page whose name starts alike is.
func TestFPMStatusPathsAgainstVarnish(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	site := testConfig(o)
	site.StatusPaths = []string{"/fpm-status", "/pools/www/status"}
	g := loadGears(t, map[string]string{"heavy": render(t, site, state.Heavy)})
	for _, p := range []string{"/fpm-status", "//fpm-status?json&full", "/x/../fpm-status", "/fpm%2Dstatus", "/FPM-STATUS/",
		"/pools/www/status", "/pools//www/%73tatus?json"} {
		if r := rawFrom(t, g, "127.0.0.1", "heavy", "GET "+p+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusForbidden {
			t.Errorf("GET %s: status %d, want 403", p, r.status)
		}
		if n := o.count(p); n != 0 {
			t.Errorf("GET %s reached the backend", p)
		}
	}
	for _, p := range []string{"/fpm-status-explained", "/blog/fpm-status", "/pools/www/statusboard"} {
		if r := rawFrom(t, g, "127.0.0.2", "heavy", "GET "+p+" HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusOK {
			t.Errorf("GET %s, a page of the site: status %d, want 200", p, r.status)
		}
	}
}

// TestFrontDoorBadInput: what a visitor may send at the front door is
// refused or ignored, and nothing the backend would trust reaches it: a
// PROXY header on the plain listener, a malformed one on the PROXY
// listener, an X-Forwarded-Proto that is no scheme, an X-Forwarded-For
// of 200 entries. Every request's door is logged.
func TestFrontDoorBadInput(t *testing.T) {
	varnishtest.Binary(t)
	o := newOrigin(t)
	g := loadGearsOn(t, varnishtest.Config{Proxy: true}, map[string]string{"heavy": render(t, testConfig(o), state.Heavy)})

	if r := rawFrom(t, g, "127.0.0.2", "heavy", "PROXY TCP4 192.0.2.1 127.0.0.1 1234 80\r\nGET /g/heavy/fd/plain HTTP/1.1\r\nHost: 127.0.0.1\r\n"); r.status != http.StatusBadRequest {
		t.Errorf("a PROXY header on the plain listener: status %d, want 400", r.status)
	}
	for _, bad := range []string{"PROXY TCP4 not-an-address 127.0.0.1 1 80\r\n", "PROXY UNKNOWN-ish\r\n", "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"} {
		conn, err := net.DialTimeout("tcp", g.v.ProxyAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, bad+"GET /g/heavy/fd/malformed HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Test-Gear: heavy\r\nConnection: close\r\n\r\n")
		io.Copy(io.Discard, conn)
		conn.Close()
	}
	for _, u := range []string{"/g/heavy/fd/plain", "/g/heavy/fd/malformed"} {
		if n := o.count(u); n != 0 {
			t.Errorf("%s reached the backend %d times", u, n)
		}
	}

	// From a trusted proxy (loopback): a scheme or nothing; the list as
	// the proxy sent it, the client its last hops.
	u := "/g/heavy/fd/xfp?cc=max-age%3D600"
	long := strings.TrimSuffix(strings.Repeat("198.51.100.7, ", 200), ", ")
	rawFrom(t, g, "127.0.0.1", "heavy", "GET "+u+" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: javascript\r\nX-Forwarded-For: "+long+"\r\n")
	if p := o.header(u, "X-Forwarded-Proto"); p != "" {
		t.Errorf("X-Forwarded-Proto javascript reached the backend as %q", p)
	}
	u2 := "/g/heavy/fd/xfp-list?cc=max-age%3D600"
	rawFrom(t, g, "127.0.0.1", "heavy", "GET "+u2+" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: HTTPS, http\r\nX-Forwarded-For: 192.0.2.9\r\n")
	if p := o.header(u2, "X-Forwarded-Proto"); p != "https" {
		t.Errorf("X-Forwarded-Proto \"HTTPS, http\" reached the backend as %q, want https (the first, lower case)", p)
	}

	// Every way in is logged: the daemon counts them (status front_door).
	conn, err := net.DialTimeout("tcp", g.v.ProxyAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "PROXY TCP4 192.0.2.44 127.0.0.1 5555 443\r\nGET /g/heavy/fd/door HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Test-Gear: heavy\r\nConnection: close\r\n\r\n")
	io.Copy(io.Discard, conn)
	conn.Close()
	rawFrom(t, g, "127.0.0.1", "heavy", "GET /g/heavy/fd/local HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	rawFrom(t, g, "127.0.0.2", "heavy", "GET /g/heavy/fd/direct HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	out, err := exec.Command("varnishlog", "-n", g.v.WorkDir, "-d", "-g", "raw", "-i", "VCL_Log").CombinedOutput()
	if err != nil {
		t.Fatalf("varnishlog: %v\n%s", err, out)
	}
	for _, door := range Doors {
		if !strings.Contains(string(out), DoorLog+door) {
			t.Errorf("no request logged %q:\n%s", DoorLog+door, out)
		}
	}
	if f := o.header("/g/heavy/fd/door", "X-Forwarded-For"); f != "192.0.2.44" {
		t.Errorf("through PROXY: the backend got X-Forwarded-For %q, want the address the header told", f)
	}
}

package lampstack

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// The FPM stack serves PHP through Apache's event MPM and proxy_fcgi from
// its private pool, with the site's environment and sessions, and the
// pool's status page reads as sensor.phpfpm reads it: over the status
// socket, and over HTTP through Apache.
func TestFPMStackServesPHP(t *testing.T) {
	bin := Need(t, "apache2", ApachePrograms...)
	dir := t.TempDir()
	root := filepath.Join(dir, "site")
	WriteFile(t, filepath.Join(root, "index.php"), `<?php
session_start();
$_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
echo PHP_SAPI, ' ', getenv('SITE_GREETING'), ' ', $_SESSION['n'], "\n";
`)
	Searchable(t, root)
	a := Apache{Dir: dir, Root: root, Port: FreePort(t), Stack: FPM, Probe: "/index.php", Conf: "SetEnv SITE_GREETING hello"}
	StartApache(t, a, bin)

	out, err := exec.Command(bin["apache2"], "-f", filepath.Join(dir, "apache.conf"), "-t", "-D", "DUMP_MODULES").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mpm_event_module") || !strings.Contains(string(out), "proxy_fcgi_module") || strings.Contains(string(out), "php_module") {
		t.Errorf("the FPM stack's modules (%v):\n%s", err, out)
	}

	b := NewBrowser(t, "http://127.0.0.1:"+strconv.Itoa(a.Port), "")
	for want := 1; want <= 2; want++ {
		p := b.Get("/index.php")
		if p.Status != 200 || p.Body != "fpm-fcgi hello "+strconv.Itoa(want)+"\n" {
			t.Errorf("GET /index.php = %d %q, want PHP-FPM's answer with the session's count %d", p.Status, p.Body, want)
		}
	}
	// The session lives in the stack's dir (the readiness probe has one too).
	cookie := b.CookieHeader("/")
	_, id, _ := strings.Cut(cookie, "PHPSESSID=")
	if _, err := os.Stat(filepath.Join(dir, "php-sessions", "sess_"+id)); id == "" || err != nil {
		t.Errorf("the browser's session (%q): %v", cookie, err)
	}

	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(a.Port) + "/fpm-status?json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"pool":"site"`) {
		t.Errorf("GET /fpm-status?json = %d %s", resp.StatusCode, body)
	}
	for _, cfg := range []sensor.PHPFPMConfig{
		{Socket: a.FPMStatusSocket(), Listen: a.FPMSocket()},
		{URL: "http://127.0.0.1:" + strconv.Itoa(a.Port) + "/fpm-status", Listen: a.FPMSocket()},
	} {
		cfg.Path, cfg.Timeout = "/fpm-status", timefmt.Duration(2*time.Second)
		r, err := sensor.NewPHPFPM(cfg)
		if err != nil {
			t.Fatal(err)
		}
		apply, err := r.Read(context.Background())
		if err != nil {
			t.Errorf("read the pool's status (%+v): %v", cfg, err)
			continue
		}
		s := sensor.Sample{Values: map[string]float64{}}
		apply(&s)
		if s.Values[sensor.PHPFPMQueue] != 0 || s.Values[sensor.PHPFPMBusyRatio] != 0 {
			t.Errorf("an idle pool read %v", s.Values)
		}
	}
}

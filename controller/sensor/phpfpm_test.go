package sensor

import (
	"context"
	"errors"
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

	"github.com/gearshift/gearshift/internal/timefmt"
)

func TestPHPFPMCheck(t *testing.T) {
	base := PHPFPMConfig{Path: "/status", Timeout: timefmt.Duration(time.Second)}
	tests := []struct {
		name string
		edit func(*PHPFPMConfig)
		want map[string]string // key: part of the message
	}{
		{"off", func(c *PHPFPMConfig) {}, nil},
		{"unix socket", func(c *PHPFPMConfig) { c.Socket = "/run/php/php8.2-fpm.sock" }, nil},
		{"tcp socket and listen", func(c *PHPFPMConfig) { c.Socket = "127.0.0.1:9000"; c.Listen = "/run/php/www.sock" }, nil},
		{"url", func(c *PHPFPMConfig) { c.URL = "http://127.0.0.1/fpm-status" }, nil},
		{"both", func(c *PHPFPMConfig) { c.URL = "http://127.0.0.1/s"; c.Socket = "/run/php.sock" },
			map[string]string{"sensor.phpfpm.socket": "give url or socket, not both"}},
		{"bad url", func(c *PHPFPMConfig) { c.URL = "127.0.0.1/status" },
			map[string]string{"sensor.phpfpm.url": "want http://host[:port]/status-path"}},
		{"bad socket", func(c *PHPFPMConfig) { c.Socket = "php.sock" },
			map[string]string{"sensor.phpfpm.socket": "neither a unix socket's absolute path nor host:port"}},
		{"bad port", func(c *PHPFPMConfig) { c.Socket = "127.0.0.1:0" }, map[string]string{"sensor.phpfpm.socket": "port must be"}},
		{"bad path", func(c *PHPFPMConfig) { c.Socket = "/run/php.sock"; c.Path = "status" }, map[string]string{"sensor.phpfpm.path": "starting with /"}},
		{"relative listen", func(c *PHPFPMConfig) { c.Socket = "127.0.0.1:9000"; c.Listen = "www.sock" }, map[string]string{"sensor.phpfpm.listen": "absolute path"}},
		{"negative max_children", func(c *PHPFPMConfig) { c.Socket = "/run/php.sock"; c.MaxChildren = -1 }, map[string]string{"sensor.phpfpm.max_children": "pm.max_children"}},
		{"timeout", func(c *PHPFPMConfig) { c.Socket = "/run/php.sock"; c.Timeout = timefmt.Duration(time.Minute) }, map[string]string{"sensor.phpfpm.timeout": "at most 10s"}},
		{"listen without a pool", func(c *PHPFPMConfig) { c.Listen = "/run/php.sock" }, map[string]string{"sensor.phpfpm": "give its url or socket"}},
		{"pools", func(c *PHPFPMConfig) {
			c.Pools = []PHPFPMPool{{Name: "www", Socket: "/run/php/www.sock"}, {Name: "shop", URL: "http://127.0.0.1/shop-status", MaxChildren: 20}}
		}, nil},
		{"pools named wrong", func(c *PHPFPMConfig) {
			c.Pools = []PHPFPMPool{{Socket: "/run/php/www.sock"}, {Name: "a", Socket: "/a.sock"}, {Name: "a", Socket: "/b.sock"}, {Name: "c"}}
		}, map[string]string{
			"sensor.phpfpm.pools[0].name": "must name the pool",
			"sensor.phpfpm.pools[2].name": "pool a is already sensor.phpfpm.pools[1]",
			"sensor.phpfpm.pools[3]":      "give url",
		}},
		{"max_children beside pools only", func(c *PHPFPMConfig) {
			c.MaxChildren = 5
			c.Pools = []PHPFPMPool{{Name: "www", Socket: "/run/php/www.sock"}}
		}, map[string]string{"sensor.phpfpm": "put them in its entry of pools"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			got := map[string]string{}
			phpfpmSource.Check(HostConfig{Sensor: Config{PHPFPM: c}}, func(key, format string, args ...any) {
				got[key] = fmt.Sprintf(format, args...)
			})
			for key, part := range tc.want {
				if !strings.Contains(got[key], part) {
					t.Errorf("%s: %q, want a problem containing %q", key, got[key], part)
				}
			}
			for key, msg := range got {
				if _, ok := tc.want[key]; !ok {
					t.Errorf("unexpected problem %s: %s", key, msg)
				}
			}
		})
	}
}

func TestPHPFPMAgainstFPM(t *testing.T) {
	f := startPHPFPM(t)
	open := func(t *testing.T, c PHPFPMConfig) *PHPFPM {
		t.Helper()
		if c.Path == "" {
			c.Path = "/status"
		}
		c.Timeout = timefmt.Duration(2 * time.Second)
		var problems []string
		c.check(func(key, format string, args ...any) {
			problems = append(problems, key+": "+fmt.Sprintf(format, args...))
		})
		if len(problems) > 0 {
			t.Fatalf("check: %v", problems)
		}
		r, err := NewPHPFPM(c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	t.Run("idle, over the pool's own sockets", func(t *testing.T) {
		for _, c := range []PHPFPMConfig{{Socket: f.unixListen}, {Socket: f.tcpListen, MaxChildren: 1}} {
			r := open(t, c)
			v := readFPM(t, r)
			// The read's own child is not busy with the site.
			if v[PHPFPMQueue] != 0 || v[PHPFPMBusyRatio] != 0 {
				t.Errorf("%s idle: %v, want a queue and busy ratio of 0", c.Socket, v)
			}
			if _, ok := v[PHPFPMMaxChildrenReached]; ok {
				t.Errorf("%s: a rate at the first read, the baseline: %v", c.Socket, v)
			}
			time.Sleep(20 * time.Millisecond)
			if v := readFPM(t, r); v[PHPFPMMaxChildrenReached] != 0 {
				t.Errorf("%s idle: %v, want no max children reached", c.Socket, v)
			}
		}
	})

	// One child, a slow script and more requests than children: the
	// rest wait in the listen queue.
	const waiting = 3
	t.Run("unix pool queue, from the kernel", func(t *testing.T) {
		r := open(t, PHPFPMConfig{Socket: f.unixStatus, Listen: f.unixListen})
		wait := occupy(t, "unix", f.unixListen, f.slow, waiting+1, time.Second)
		defer wait()
		// Once the child has taken the first request, the rest wait.
		waitFPM(t, r, "unix pool's queue", func(v map[string]float64) bool {
			return v[PHPFPMQueue] == waiting && v[PHPFPMBusyRatio] == 1
		})
	})
	t.Run("unix pool without listen says why", func(t *testing.T) {
		r := open(t, PHPFPMConfig{Socket: f.unixStatus})
		_, err := r.Read(context.Background())
		if err == nil || !strings.Contains(err.Error(), "PHP bug #80739") {
			t.Errorf("Read: %v, want the unix socket's queue missing, with why", err)
		}
	})
	t.Run("tcp pool queue and max children reached, from php-fpm", func(t *testing.T) {
		r := open(t, PHPFPMConfig{Socket: f.tcpStatus, MaxChildren: 1})
		readFPM(t, r) // the baseline of the rate
		wait := occupy(t, "tcp", f.tcpListen, f.slow, waiting+1, time.Second)
		defer wait()
		// The process manager refreshes the queue and counts that it
		// wanted a spare child and had max_children already once a
		// second: the rate is above 0 for one read.
		reached, queued := false, false
		waitFPM(t, r, "tcp pool's queue and max children reached", func(v map[string]float64) bool {
			reached = reached || v[PHPFPMMaxChildrenReached] > 0
			queued = queued || v[PHPFPMQueue] > 0 && v[PHPFPMBusyRatio] == 1
			return reached && queued
		})
	})
	t.Run("two pools summed", func(t *testing.T) {
		r := open(t, PHPFPMConfig{Pools: []PHPFPMPool{
			{Name: "unixpool", Socket: f.unixStatus, Listen: f.unixListen},
			{Name: "tcppool", Socket: f.tcpStatus, MaxChildren: 1},
		}})
		// php-fpm refreshes the tcp pool's queue once a second: the
		// requests outlast a refresh.
		w1 := occupy(t, "unix", f.unixListen, f.slow, 3, 2*time.Second)
		w2 := occupy(t, "tcp", f.tcpListen, f.slow, 2, 2*time.Second)
		defer w1()
		defer w2()
		waitFPM(t, r, "both queues", func(v map[string]float64) bool { return v[PHPFPMQueue] == 2+1 && v[PHPFPMBusyRatio] == 1 })
	})
}

// TestPHPFPMBadInput: what config check says, and what a read says, of
// a page that is not the pool's.
func TestPHPFPMBadInput(t *testing.T) {
	f := startPHPFPM(t)
	notFPM := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "<html><body>It works!</body></html>")
	}))
	defer notFPM.Close()
	gone := filepath.Join(t.TempDir(), "gone.sock")
	tests := []struct {
		name          string
		cfg           PHPFPMConfig
		problem       string // key: message part, at config check
		absent        string
		readErr       string
		readsSomeSigs bool
	}{
		{name: "a page that is not php-fpm's", cfg: PHPFPMConfig{URL: notFPM.URL + "/fpm-status"},
			problem: "sensor.phpfpm: " + notFPM.URL, readErr: `not a PHP-FPM status page (not the JSON of ?json: it begins "<html>`},
		{name: "a path that is not the status page", cfg: PHPFPMConfig{Socket: f.unixStatus, Path: "/fpm-status"},
			problem: "sensor.phpfpm: php-fpm at " + f.unixStatus, readErr: "404 File not found. (Primary script unknown): not the pool's pm.status_path"},
		{name: "a pool that does not exist", cfg: PHPFPMConfig{Pools: []PHPFPMPool{{Name: "shop", Socket: f.unixStatus, Listen: f.unixListen}}},
			problem: "sensor.phpfpm.pools[0]: pool shop at " + f.unixStatus, readErr: "the status page is pool unixpool's, not shop's"},
		{name: "a dynamic pool without max_children", cfg: PHPFPMConfig{Socket: f.tcpStatus},
			problem: "sensor.phpfpm.max_children: pool tcppool runs pm = dynamic", readErr: "set max_children", readsSomeSigs: true},
		{name: "php-fpm not running", cfg: PHPFPMConfig{Socket: gone},
			absent: "sensor.phpfpm: read php-fpm status: no socket " + gone, readErr: "is php-fpm running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Timeout = timefmt.Duration(2 * time.Second)
			if tc.cfg.Path == "" {
				tc.cfg.Path = "/status"
			}
			cfg := HostConfig{Sensor: Config{PHPFPM: tc.cfg}}
			var problems, absent []string
			collect := func(to *[]string) func(key, format string, args ...any) {
				return func(key, format string, args ...any) { *to = append(*to, key+": "+fmt.Sprintf(format, args...)) }
			}
			phpfpmSource.Check(cfg, collect(&problems))
			if len(problems) > 0 {
				t.Fatalf("settings refused: %v", problems)
			}
			Reach(context.Background(), cfg, collect(&problems), collect(&absent))
			for _, c := range []struct {
				what string
				got  []string
				want string
			}{{"problem", problems, tc.problem}, {"absent", absent, tc.absent}} {
				switch {
				case c.want == "" && len(c.got) > 0:
					t.Errorf("config check: %s %v, want none", c.what, c.got)
				case c.want != "" && (len(c.got) != 1 || !strings.HasPrefix(c.got[0], c.want)):
					t.Errorf("config check: %s %q, want one beginning %q", c.what, c.got, c.want)
				}
			}
			for _, p := range append(problems, absent...) {
				if strings.Count(p, "\n") > 0 || !strings.Contains(p, tc.readErr) {
					t.Errorf("config check said %q: want one line saying %q", p, tc.readErr)
				}
			}
			// At run time: unavailable, with the reason, and no panic.
			r, err := NewPHPFPM(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			apply, err := r.Read(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.readErr) {
				t.Fatalf("Read: %v, want an error containing %q", err, tc.readErr)
			}
			s := Sample{Values: map[string]float64{}}
			if apply != nil {
				apply(&s)
			}
			if _, ok := s.Values[PHPFPMBusyRatio]; ok {
				t.Errorf("busy ratio %v read from a bad page", s.Values)
			}
			if _, ok := s.Values[PHPFPMQueue]; ok != tc.readsSomeSigs {
				t.Errorf("queue read %v, want %v", s.Values, tc.readsSomeSigs)
			}
		})
	}
}

// TestPHPFPMSocketPermission: a socket the daemon's user may not write to
// is said to be one, at config check and at a read. As root it runs
// again as nobody.
func TestPHPFPMSocketPermission(t *testing.T) {
	sock := os.Getenv("GEARSHIFT_TEST_SOCKET")
	if sock == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root to make a socket that nobody may not connect to")
		}
		dir := t.TempDir()
		sock = filepath.Join(dir, "fpm.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := os.Chmod(sock, 0o660); err != nil {
			t.Fatal(err)
		}
		rerunAsNobody(t, "GEARSHIFT_TEST_SOCKET="+sock)
		return
	}
	cfg := PHPFPMConfig{Socket: sock, Path: "/status", Timeout: timefmt.Duration(time.Second)}
	var problems []string
	phpfpmSource.Reach(context.Background(), HostConfig{Sensor: Config{PHPFPM: cfg}},
		func(key, format string, args ...any) {
			problems = append(problems, key+": "+fmt.Sprintf(format, args...))
		},
		func(key, format string, args ...any) { t.Errorf("absent %s: "+format, append([]any{key}, args...)...) })
	want := "sensor.phpfpm: read php-fpm status: permission denied on " + sock + ": the daemon's user needs write access to it"
	if len(problems) != 1 || !strings.HasPrefix(problems[0], want) {
		t.Errorf("config check: %q, want %q", problems, want)
	}
	r, _ := NewPHPFPM(cfg)
	if _, err := r.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Read: %v, want permission denied", err)
	}
}

// rerunAsNobody runs the calling test again in a copy of the test binary
// as the user nobody, with env, and fails when it does not pass there.
func rerunAsNobody(t *testing.T, env ...string) {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range env {
		if _, v, _ := strings.Cut(e, "="); strings.HasPrefix(v, "/") {
			for d := filepath.Dir(v); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
				os.Chmod(d, 0o755)
			}
		}
	}
	bin := filepath.Join(dir, "sensor.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s as nobody: %v\n%s", t.Name(), err, out)
	}
}

// Over HTTP the status page is asked for with json&full (a query of the
// URL kept), and the child serving the read is not counted busy.
func TestPHPFPMOverHTTP(t *testing.T) {
	page, err := os.ReadFile("testdata/phpfpm/static-own-socket-full.json")
	if err != nil {
		t.Fatal(err)
	}
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		w.Write(page)
	}))
	defer srv.Close()
	r, err := NewPHPFPM(PHPFPMConfig{URL: srv.URL + "/status?pool=www&json", Timeout: timefmt.Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	apply, err := r.Read(context.Background())
	// A unix pool read over HTTP has no queue without listen: said, and
	// the busy ratio still read.
	if err == nil || !strings.Contains(err.Error(), "the status page is read over HTTP: set listen") {
		t.Errorf("Read: %v, want the queue's missing socket named", err)
	}
	if query != "pool=www&json&full" {
		t.Errorf("query %q, want pool=www&json&full", query)
	}
	s := Sample{Values: map[string]float64{}}
	apply(&s)
	if v, ok := s.Values[PHPFPMBusyRatio]; !ok || v != 0 {
		t.Errorf("busy ratio %v, %v; want 0: the one active child serves the read", v, ok)
	}
}

// At run time a pool that cannot be read leaves the signals unavailable
// and says why in the sample's problems; the sample itself is read.
func TestHostWithPHPFPMDown(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "php8.2-fpm.sock")
	h, err := NewHost(HostConfig{Sensor: Config{PHPFPM: PHPFPMConfig{Socket: gone, Path: "/status", Timeout: timefmt.Duration(time.Second)}}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s, err := h.Sample(context.Background())
		if err != nil {
			t.Fatalf("Sample: %v", err)
		}
		if len(s.Problems) != 1 || s.Problems[0].Source != "phpfpm" || !strings.Contains(s.Problems[0].Err.Error(), "no socket "+gone) {
			t.Errorf("problems %v, want phpfpm's missing socket", s.Problems)
		}
		for _, name := range []string{PHPFPMQueue, PHPFPMBusyRatio, PHPFPMMaxChildrenReached} {
			if v, ok := s.Values[name]; ok {
				t.Errorf("%s = %v with php-fpm down", name, v)
			}
		}
	}
}

// A pool with two figures missing is one problem a poll, naming both.
func TestPHPFPMOneProblemAPool(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"pool":"www","process manager":"dynamic","listen queue":0,"listen queue len":0,"active processes":1,"total processes":2,"max children reached":0}`)
	}))
	defer srv.Close()
	r, err := NewPHPFPM(PHPFPMConfig{URL: srv.URL + "/status", Timeout: timefmt.Duration(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Read(context.Background())
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 || !strings.Contains(ps[0].Err.Error(), "PHP bug #80739") || !strings.Contains(ps[0].Err.Error(), "set max_children") {
		t.Errorf("Read: %v, want one problem naming the queue and max_children", err)
	}
}

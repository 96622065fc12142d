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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/fastcgi"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/timefmt"
)

func TestParseFPMStatus(t *testing.T) {
	tests := []struct {
		name    string
		file    string // under testdata/phpfpm, or text
		text    string
		want    fpmPage
		wantErr string
	}{
		// Real pages of PHP-FPM 8.2 (Debian's php8.2-fpm).
		{name: "own socket counts the read", file: "static-own-socket-full.json", want: fpmPage{
			Pool: "unixpool", ProcessManager: "static", StartTime: 1796195746, ActiveProcesses: 1, TotalProcesses: 1, self: 1}},
		{name: "pm.status_listen does not", file: "static-status-listen-full.json", want: fpmPage{
			Pool: "unixpool", ProcessManager: "static", StartTime: 1796195746, TotalProcesses: 1}},
		{name: "tcp pool without full", file: "dynamic-tcp.json", want: fpmPage{
			Pool: "tcppool", ProcessManager: "dynamic", StartTime: 1796195746, ListenQueueLen: 4096,
			ActiveProcesses: 1, TotalProcesses: 1, MaxChildrenReached: 2}},
		{name: "the text page", file: "dynamic-tcp.txt", wantErr: `not a PHP-FPM status page (not the JSON of ?json: it begins "pool:`},
		{name: "HTML", text: "<html><body>It works!</body></html>", wantErr: `it begins "<html>`},
		{name: "empty", text: "", wantErr: "an empty page"},
		{name: "other JSON", text: `{"status":"ok"}`, wantErr: `no "pool", "listen queue", "active processes", "total processes", "max children reached"`},
		{name: "a JSON list", text: `[1,2]`, wantErr: "not a PHP-FPM status page"},
		{name: "more active than processes", text: `{"pool":"www","listen queue":0,"active processes":3,"total processes":2,"max children reached":0}`,
			wantErr: "3 active of 2 processes"},
		{name: "negative queue", text: `{"pool":"www","listen queue":-1,"active processes":0,"total processes":2,"max children reached":0}`,
			wantErr: "a queue of -1"},
		{name: "status reads of another query count", text: `{"pool":"www","listen queue":2,"listen queue len":511,"active processes":3,"total processes":4,"max children reached":7,
			"processes":[{"state":"Running","request uri":"/status?json"},{"state":"Running","request uri":"/index.php"},{"state":"Reading headers","request uri":"/status"},{"state":"Idle","request uri":"/status"}]}`,
			want: fpmPage{Pool: "www", ListenQueue: 2, ListenQueueLen: 511, ActiveProcesses: 3, TotalProcesses: 4, MaxChildrenReached: 7, self: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.text)
			if tc.file != "" {
				var err error
				if b, err = os.ReadFile(filepath.Join("testdata/phpfpm", tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := parseFPMStatus(b, "/status")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFPMStatus: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || *got != tc.want {
				t.Errorf("parseFPMStatus = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCounterRate(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	steps := []struct {
		name    string
		at      time.Duration
		started int64
		v       uint64
		rate    float64
		ok      bool
	}{
		{"first is a baseline", 0, 100, 5, 0, false},
		{"rate", 2 * time.Second, 100, 9, 2, true},
		{"still", 3 * time.Second, 100, 9, 0, true},
		{"not later", 3 * time.Second, 100, 12, 0, false},
		{"went down: a baseline", 4 * time.Second, 100, 1, 0, false},
		{"after the reset", 5 * time.Second, 100, 2, 1, true},
		{"pool restarted, counter higher: a baseline", 6 * time.Second, 200, 50, 0, false},
		{"after the restart", 8 * time.Second, 200, 51, 0.5, true},
	}
	var c counterRate
	for _, s := range steps {
		rate, ok := c.update(t0.Add(s.at), s.started, s.v)
		if rate != s.rate || ok != s.ok {
			t.Errorf("%s: update = %v, %v; want %v, %v", s.name, rate, ok, s.rate, s.ok)
		}
	}
}

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

// fpmInstance is a private php-fpm started by startPHPFPM.
type fpmInstance struct {
	dir        string
	unixListen string // pool "unixpool": static, one child, on a unix socket
	unixStatus string // its pm.status_listen
	tcpListen  string // pool "tcppool": dynamic, at most one child, on 127.0.0.1
	tcpStatus  string // its pm.status_listen, a unix socket
	slow       string // a PHP script sleeping ?ms= milliseconds
}

// startPHPFPM starts Debian's php-fpm8.2 in the foreground with a config
// of its own in a temp dir: two pools of one child each (as www-data
// when the test runs as root), and stops it in Cleanup.
func startPHPFPM(tb testing.TB) fpmInstance {
	tb.Helper()
	bin := testenv.Need(tb, "php-fpm8.2", "php8.2-fpm")
	dir := tb.TempDir()
	f := fpmInstance{
		dir:        dir,
		unixListen: filepath.Join(dir, "unix.sock"), unixStatus: filepath.Join(dir, "unix-status.sock"),
		tcpListen: testenv.FreeAddr(tb), tcpStatus: filepath.Join(dir, "tcp-status.sock"),
		slow: filepath.Join(dir, "slow.php"),
	}
	args := []string{"-F", "-y", filepath.Join(dir, "php-fpm.conf"), "-p", dir}
	user := ""
	if os.Geteuid() == 0 {
		// The pools' children run as www-data; the master keeps root, so
		// only -R lets it start, and the script's directory must be
		// searchable by www-data.
		user = "user = www-data\ngroup = www-data\nlisten.owner = root\nlisten.mode = 0660\n"
		args = append(args, "-R")
		for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				tb.Fatal(err)
			}
		}
	}
	conf := fmt.Sprintf(`[global]
pid = %[1]s/php-fpm.pid
error_log = %[1]s/error.log
daemonize = no

[unixpool]
%[2]slisten = %[3]s
pm = static
pm.max_children = 1
pm.status_path = /status
pm.status_listen = %[4]s

[tcppool]
%[2]slisten = %[5]s
pm = dynamic
pm.max_children = 1
pm.start_servers = 1
pm.min_spare_servers = 1
pm.max_spare_servers = 1
pm.status_path = /status
pm.status_listen = %[6]s
`, dir, user, f.unixListen, f.unixStatus, f.tcpListen, f.tcpStatus)
	if err := os.WriteFile(filepath.Join(dir, "php-fpm.conf"), []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	script := "<?php usleep((int)($_GET['ms'] ?? 1000) * 1000); echo \"slept\\n\";\n"
	if err := os.WriteFile(f.slow, []byte(script), 0o644); err != nil {
		tb.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "php-fpm.out"))
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	testenv.DiesWithTest(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start php-fpm8.2: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	logs := func() string {
		a, _ := os.ReadFile(filepath.Join(dir, "php-fpm.out"))
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(a) + string(b)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			tb.Fatalf("php-fpm8.2 exited at start:\n%s", logs())
		default:
		}
		ready := true
		for _, sock := range []string{f.unixListen, f.unixStatus, f.tcpStatus} {
			if c, err := net.Dial("unix", sock); err != nil {
				ready = false
			} else {
				c.Close()
			}
		}
		if c, err := net.Dial("tcp", f.tcpListen); err != nil {
			ready = false
		} else {
			c.Close()
		}
		if ready {
			return f
		}
		if time.Now().After(deadline) {
			tb.Fatalf("php-fpm8.2 did not listen within 15s:\n%s", logs())
		}
	}
}

// occupy sends n requests for the slow script, each sleeping d, to the
// pool at network/addr, and returns a wait for their answers.
func occupy(tb testing.TB, network, addr, script string, n int, d time.Duration) (wait func()) {
	tb.Helper()
	var wg sync.WaitGroup
	q := fmt.Sprintf("ms=%d", d.Milliseconds())
	for range n {
		wg.Go(func() {
			// Answers come one after the other, one child each.
			fastcgi.Do(context.Background(), fastcgi.Request{
				Network: network, Address: addr, Timeout: time.Duration(n+2) * d,
				Params: map[string]string{
					"REQUEST_METHOD": "GET", "SCRIPT_FILENAME": script, "SCRIPT_NAME": "/slow.php",
					"REQUEST_URI": "/slow.php?" + q, "QUERY_STRING": q,
				},
			})
		})
	}
	return wg.Wait
}

// readFPM reads the source of cfg once, and fails on a problem.
func readFPM(tb testing.TB, r *PHPFPM) map[string]float64 {
	tb.Helper()
	apply, err := r.Read(context.Background())
	if err != nil {
		tb.Fatalf("Read: %v", err)
	}
	s := Sample{Values: map[string]float64{}}
	if apply != nil {
		apply(&s)
	}
	return s.Values
}

// waitFPM reads r until cond holds of the values, 10 s at most.
func waitFPM(tb testing.TB, r *PHPFPM, what string, cond func(map[string]float64) bool) map[string]float64 {
	tb.Helper()
	var v map[string]float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if v = readFPM(tb, r); cond(v) {
			return v
		}
	}
	tb.Fatalf("%s: not within 10s; last values %v", what, v)
	return nil
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

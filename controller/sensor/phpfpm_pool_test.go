package sensor

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/fastcgi"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

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

// Package testenv holds the tests' policy for what the machine must
// provide: a missing program (or root) fails the test in CI (CI set in the
// environment, as on the fresh machine CI runs on) and skips it elsewhere,
// saying what to install.
package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// CI tells whether the tests run in CI, where nothing may be skipped for
// want of a tool.
func CI() bool { return os.Getenv("CI") != "" }

// Unavailable ends the test for want of something the machine lacks: a
// failure in CI, a skip elsewhere. msg says what is missing and how to get
// it.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		tb.Fatal(msg)
		return
	}
	tb.Skip(msg)
}

// Lookup finds the program prog: on $PATH, else in /usr/sbin, /usr/bin or
// /sbin (a non-root $PATH often lacks the sbin directories). An absolute
// prog is taken as it is, if it exists.
func Lookup(prog string) (string, bool) {
	if filepath.IsAbs(prog) {
		_, err := os.Stat(prog)
		return prog, err == nil
	}
	if path, err := exec.LookPath(prog); err == nil {
		return path, true
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin"} {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// Need returns the path of the program prog (or the file, when prog is an
// absolute path); missing, the test fails in CI and is skipped elsewhere,
// naming debPackage, the Debian package that provides it.
func Need(tb testing.TB, prog, debPackage string) string {
	tb.Helper()
	if path, ok := Lookup(prog); ok {
		return path
	}
	Unavailable(tb, "%s not found: run scripts/install-deps.sh (Debian package %s)", prog, debPackage)
	return ""
}

// RequireRoot ends the test unless it runs as root (a failure in CI, a
// skip elsewhere); why says what needs root.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Unavailable(tb, "%s needs root", why)
	}
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago: for a server a test starts (varnishd, Apache, Prometheus).
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// DiesWithTest makes the server cmd starts die with the test binary: the
// kernel sends it SIGKILL when the binary goes, so a test killed at its
// timeout (whose cleanups never run) leaves no gearshift daemon,
// prometheus or exporter running to load the machine for what runs next.
// Call it before cmd.Start; it keeps the SysProcAttr already set. The
// kernel forgets it when the program changes its user (varnishd's jail,
// mariadbd's --user), so those still outlive a killed binary.
func DiesWithTest(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// Eventually polls cond until it holds, and fails tb when it does not
// within timeout: a bound for a busy machine, not a measure of speed.
func Eventually(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("still waiting for %s after %s", what, timeout)
		}
	}
}

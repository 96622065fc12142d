// Package varnishtest starts a real varnishd for tests: free loopback ports,
// a private working directory, a random admin secret, and a stop in t.Cleanup.
package varnishtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// DefaultVCL is the boot program used when Config.VCL is empty: no backend,
// every request answers 503. Enough for a manager that accepts CLI commands.
const DefaultVCL = "vcl 4.1;\nbackend default none;\n"

// Config describes the varnishd to start. The zero value is usable.
type Config struct {
	VCL    string   // boot VCL text (-f); DefaultVCL when empty
	Params []string // extra "name=value" runtime parameters (-p)
	// CLIFile is a command file varnishd runs at every start (-I). With
	// it, no -f VCL is loaded: the file loads and uses the boot VCL, as
	// a VCL that hands requests to a label needs.
	CLIFile string
	// Proxy adds a listener speaking PROXY protocol (-a proxy=ADDR,PROXY),
	// as a TLS terminator such as hitch connects to; see Varnish.ProxyAddr.
	Proxy bool
}

// Varnish is a running varnishd owned by one test.
type Varnish struct {
	Dir        string // temp dir holding the secret, boot VCL and log
	WorkDir    string // varnishd -n directory
	AdminAddr  string // -T address, host:port
	HTTPAddr   string // -a address, host:port
	ProxyAddr  string // the PROXY protocol listener's host:port; "" without Config.Proxy
	SecretFile string // -S file
	Secret     []byte // contents of SecretFile, trailing newline included

	tb  testing.TB
	cfg Config
	cmd *exec.Cmd
}

// Binary returns the path of varnishd. When it is missing the test fails in
// CI (CI set in the environment) and is skipped elsewhere, saying why.
func Binary(tb testing.TB) string {
	tb.Helper()
	return testenv.Need(tb, "varnishd", "varnish")
}

// Start starts varnishd and registers its stop with tb.Cleanup. It returns
// once the HTTP listener answers.
func Start(tb testing.TB, cfg Config) *Varnish {
	tb.Helper()
	v := prepare(tb, cfg)
	tb.Cleanup(v.Kill)
	// A port free a moment ago can be taken by another test's server in
	// between (the packages' tests run side by side): new ports, again.
	for attempt := 1; ; attempt++ {
		err := v.tryStart()
		if err == nil {
			return v
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			tb.Fatal(err)
		}
		os.Remove(filepath.Join(v.Dir, "varnishd.log"))
		v.AdminAddr, v.HTTPAddr = testenv.FreeAddr(tb), testenv.FreeAddr(tb)
		if cfg.Proxy {
			v.ProxyAddr = testenv.FreeAddr(tb)
		}
	}
}

// errPortTaken: varnishd could not listen on a port it was given.
var errPortTaken = errors.New("a port was taken")

// prepare makes the working directory, secret and boot VCL of a varnishd
// on free loopback ports, not started.
func prepare(tb testing.TB, cfg Config) *Varnish {
	tb.Helper()
	Binary(tb)
	dir := tb.TempDir()
	// The VCL compiler runs as Varnish's unprivileged user: every directory
	// on the way to the working directory must be searchable by it.
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatalf("chmod %s: %v", d, err)
		}
	}
	if cfg.VCL == "" {
		cfg.VCL = DefaultVCL
	}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		tb.Fatal(err)
	}
	v := &Varnish{
		Dir:        dir,
		WorkDir:    filepath.Join(dir, "n"),
		AdminAddr:  testenv.FreeAddr(tb),
		HTTPAddr:   testenv.FreeAddr(tb),
		SecretFile: filepath.Join(dir, "secret"),
		// A trailing newline, as `dd | base64 > secret` leaves one: it is
		// part of the secret and clients must hash it.
		Secret: []byte(hex.EncodeToString(raw) + "\n"),
		tb:     tb,
		cfg:    cfg,
	}
	if cfg.Proxy {
		v.ProxyAddr = testenv.FreeAddr(tb)
	}
	if err := os.WriteFile(v.SecretFile, v.Secret, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot.vcl"), []byte(cfg.VCL), 0o644); err != nil {
		tb.Fatal(err)
	}
	return v
}

func (v *Varnish) start() {
	v.tb.Helper()
	if err := v.tryStart(); err != nil {
		v.tb.Fatal(err)
	}
}

// tryStart starts varnishd and waits until its HTTP listener answers.
func (v *Varnish) tryStart() error {
	boot := filepath.Join(v.Dir, "boot.vcl")
	if v.cfg.CLIFile != "" {
		boot = "" // -f '': the -I file loads the boot VCL
	}
	args := []string{
		"-F", "-n", v.WorkDir,
		"-a", v.HTTPAddr, "-T", v.AdminAddr, "-S", v.SecretFile,
		"-f", boot,
		"-s", "malloc,64m",
		"-p", "vcl_cooldown=1",
	}
	if v.cfg.CLIFile != "" {
		args = append(args, "-I", v.cfg.CLIFile)
	}
	if v.ProxyAddr != "" {
		args = append(args, "-a", "proxy="+v.ProxyAddr+",PROXY")
	}
	for _, p := range v.cfg.Params {
		args = append(args, "-p", p)
	}
	logf, err := os.OpenFile(filepath.Join(v.Dir, "varnishd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(Binary(v.tb), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: Kill takes the manager and its cache child together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start varnishd: %w", err)
	}
	v.cmd = cmd
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()

	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			v.cmd = nil
			log := v.Log()
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("varnishd exited at start (%w):\n%s", errPortTaken, log)
			}
			return fmt.Errorf("varnishd exited at start:\n%s", log)
		default:
		}
		resp, err := client.Get("http://" + v.HTTPAddr + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	v.Kill()
	return fmt.Errorf("varnishd did not answer on %s within 60s:\n%s", v.HTTPAddr, v.Log())
}

// Kill stops varnishd at once (manager and child) and waits for it to exit.
// Safe to call more than once.
func (v *Varnish) Kill() {
	if v.cmd == nil || v.cmd.Process == nil {
		return
	}
	pid := v.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGKILL)
	// The reaper goroutine in start owns Wait; poll until the group is gone.
	for i := 0; i < 200; i++ {
		if err := syscall.Kill(-pid, 0); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	v.cmd = nil
}

// CacheChild returns the pid of the manager's cache child, 0 when none
// runs: the oldest process whose parent is the manager (the manager forks
// for each VCL compile too, for a moment). Killing it is a crash the
// manager recovers from by starting a new child.
func (v *Varnish) CacheChild() int {
	if v.cmd == nil || v.cmd.Process == nil {
		return 0
	}
	manager := v.cmd.Process.Pid
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	child, oldest := 0, 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid … starttime (the 22nd field); comm may
		// hold spaces.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		start, _ := strconv.Atoi(f[19])
		if ppid != manager {
			continue
		}
		if pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p))); child == 0 || start < oldest {
			child, oldest = pid, start
		}
	}
	return child
}

// Restart kills varnishd and starts a new manager with the same ports,
// working directory and secret: every VCL loaded since boot is gone.
func (v *Varnish) Restart() {
	v.tb.Helper()
	v.Kill()
	v.start()
}

// URL returns the http URL of path on Varnish's client listener.
func (v *Varnish) URL(path string) string {
	return "http://" + v.HTTPAddr + path
}

// Log returns what varnishd printed so far.
func (v *Varnish) Log() string {
	b, _ := os.ReadFile(filepath.Join(v.Dir, "varnishd.log"))
	return string(b)
}

// Adm runs the varnishadm program against this varnishd and returns its
// output; a non-zero exit is an error carrying the output.
func (v *Varnish) Adm(args ...string) (string, error) {
	full := append([]string{"-T", v.AdminAddr, "-S", v.SecretFile, "-t", "30"}, args...)
	var out bytes.Buffer
	cmd := exec.Command("varnishadm", full...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("varnishadm %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// WithoutModules returns the runtime parameter of a Varnish that has no
// vmod but Varnish's own std and proxy: a vmod_path of its own holding
// copies of them alone, as on a host without varnish-modules.
func WithoutModules(tb testing.TB) string {
	tb.Helper()
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu/varnish/vmods", "/usr/lib/aarch64-linux-gnu/varnish/vmods",
		"/usr/lib/varnish/vmods", "/usr/lib64/varnish/vmods", "/usr/local/lib/varnish/vmods"} {
		b, err := os.ReadFile(filepath.Join(d, "libvmod_std.so"))
		if err != nil {
			continue
		}
		dir := tb.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "libvmod_std.so"), b, 0o644); err != nil {
			tb.Fatal(err)
		}
		// proxy and purge ship with Varnish itself, as std does.
		for _, vmod := range []string{"libvmod_proxy.so", "libvmod_purge.so"} {
			p, err := os.ReadFile(filepath.Join(d, vmod))
			if err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, vmod), p, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		return "vmod_path=" + dir
	}
	tb.Fatal("no libvmod_std.so in the usual vmod directories: where did the varnish package put it?")
	return ""
}

// Counter reads one counter of the running varnishd with varnishstat
// (MAIN.bans, the length of the ban list), failing the test when it
// cannot.
func (v *Varnish) Counter(tb testing.TB, name string) int {
	tb.Helper()
	out, err := exec.Command("varnishstat", "-n", v.WorkDir, "-1", "-f", name).Output()
	if err != nil {
		tb.Fatalf("varnishstat: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || f[0] != name {
		tb.Fatalf("varnishstat: no %s in %q", name, out)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

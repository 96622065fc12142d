package system

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// debianVarnishArgs reads the varnishd command line of Debian's own
// varnish.service, its continuation lines joined.
func debianVarnishArgs(tb testing.TB) []string {
	tb.Helper()
	const unit = "/lib/systemd/system/varnish.service"
	b, err := os.ReadFile(testenv.Need(tb, unit, "varnish"))
	if err != nil {
		tb.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		if cmd, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return strings.Fields(cmd)
		}
	}
	tb.Fatalf("no ExecStart= in %s", unit)
	return nil
}

// gearshift as shipped drives Varnish as Debian ships it: varnishd runs with
// the Debian unit's own command line (jail, -F, -a, -T, -f default.vcl, -S,
// -s malloc,256m), only its ports, files and working directory moved into a
// temp dir, and gearshift runs the shipped scripts/gearshift.yaml with only
// the admin port and paths changed. It loads its profiles beside the boot
// VCL and switches.
func TestDebianStockVarnish(t *testing.T) {
	args := debianVarnishArgs(t)
	if got, want := strings.Join(args, " "), "/usr/sbin/varnishd -j unix,user=vcache -F -a :6081 -T localhost:6082 -f /etc/varnish/default.vcl -S /etc/varnish/secret -s malloc,256m"; got != want {
		t.Fatalf("Debian's varnish.service runs\n  %s\nnot, as this test and the README expect,\n  %s", got, want)
	}
	stockVCL, err := os.ReadFile("/etc/varnish/default.vcl")
	if err != nil {
		t.Fatalf("Debian's varnish package ships /etc/varnish/default.vcl: %v", err)
	}

	dir := t.TempDir()
	// The jailed compiler runs as Debian's vcache user: the way to the
	// working directory must be searchable.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	v := &varnishtest.Varnish{
		Dir:        dir,
		WorkDir:    filepath.Join(dir, "n"),
		AdminAddr:  testenv.FreeAddr(t),
		HTTPAddr:   testenv.FreeAddr(t),
		SecretFile: filepath.Join(dir, "secret"),
	}
	os.WriteFile(v.SecretFile, []byte("a-secret-of-this-test\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "default.vcl"), stockVCL, 0o644)
	moved := map[string]string{
		":6081": v.HTTPAddr, "localhost:6082": v.AdminAddr,
		"/etc/varnish/default.vcl": filepath.Join(dir, "default.vcl"), "/etc/varnish/secret": v.SecretFile,
	}
	var vargs []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		if m, ok := moved[a]; ok {
			a = m
		}
		// The unix jail needs root; elsewhere the test runs unjailed.
		if a == "unix,user=vcache" && os.Geteuid() != 0 {
			a = "none"
		}
		vargs = append(vargs, a)
	}
	vargs = append(vargs, "-n", v.WorkDir)
	varnishd := exec.Command(varnishtest.Binary(t), vargs...)
	logf, _ := os.Create(filepath.Join(dir, "varnishd.log"))
	varnishd.Stdout, varnishd.Stderr = logf, logf
	varnishd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := varnishd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { varnishd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-varnishd.Process.Pid, syscall.SIGKILL)
		<-exited
		logf.Close()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := v.Adm("ping"); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("varnishd %s exited:\n%s", strings.Join(vargs, " "), v.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("varnishd did not answer on %s:\n%s", v.AdminAddr, v.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	shipped, err := os.ReadFile(filepath.Join("..", "..", "scripts", "gearshift.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer("127.0.0.1:6082", v.AdminAddr, "/etc/varnish/secret", v.SecretFile).Replace(string(shipped))
	if conf == string(shipped) {
		t.Fatal("the shipped config no longer names Debian's admin port and secret")
	}
	conf += "\n# Paths of this test's daemon.\ncontrol: { socket: " + filepath.Join(dir, "gearshift.sock") + " }\n" +
		"log: { file: " + filepath.Join(dir, "gearshift.log") + " }\npid_file: " + filepath.Join(dir, "gearshift.pid") + "\n" +
		"history: { dir: " + filepath.Join(dir, "history") + " }\n"
	confPath := filepath.Join(dir, "gearshift.yaml")
	os.WriteFile(confPath, []byte(conf), 0o644)

	if out, _, code := runGearshift(t, "config", "check", "--config", confPath); code != 0 {
		t.Fatalf("config check of the shipped config: exit %d\n%s", code, out)
	}
	d := spawnDaemon(t, v, confPath, "NOTIFY_SOCKET=")
	t.Cleanup(func() {
		if d.running() {
			d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.exited:
			case <-time.After(30 * time.Second):
				d.cmd.Process.Kill()
				<-d.exited
			}
		}
		if t.Failed() {
			t.Logf("gearshift output:\n%s", d.out)
		}
	})

	// Whatever the load of this machine, gearshift makes one of its own
	// profiles active in place of Debian's boot VCL.
	d.eventually("a gearshift profile active", 90*time.Second, func() error {
		if !strings.HasPrefix(activeVCL(t, v), "gearshift-") {
			return os.ErrNotExist
		}
		return nil
	})
	if out, stderr, code := d.gs("force", "heavy", "--for", "10m"); code != 0 {
		t.Fatalf("force heavy: exit %d\n%s%s", code, out, stderr)
	}
	if got := activeVCL(t, v); !strings.HasPrefix(got, "gearshift-heavy-") {
		t.Errorf("after force heavy, Varnish runs %s", got)
	}
	list, err := v.Adm("vcl.list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, " boot") {
		t.Errorf("gearshift discarded Debian's boot VCL, which it did not load:\n%s", list)
	}
	// Varnish answers through the heavy profile: the stock backend
	// (127.0.0.1:8080) is not running here, so with a 503, but the gear's
	// header is on it.
	if got := profileHeaderAnyStatus(t, v.URL("/")); got != "heavy" {
		t.Errorf("X-Gearshift-Profile %q, want heavy", got)
	}
}

// profileHeaderAnyStatus returns the X-Gearshift-Profile of a GET, whatever
// its status.
func profileHeaderAnyStatus(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("X-Gearshift-Profile")
}

package system

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// nobody is the unprivileged user of Debian's base system, and nogroup its group.
const nobody, nogroup = 65534, 65534

// runAsNobody runs the built binary as nobody:nogroup.
func runAsNobody(tb testing.TB, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(gearshiftBin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=", "HOME=/")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nogroup}}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		tb.Fatal(err)
	}
	return o.String(), e.String(), code
}

// openToOthers makes path and the directories above it, up to the temp
// dir, traversable by nobody.
func openToOthers(tb testing.TB, paths ...string) {
	tb.Helper()
	for _, p := range paths {
		for d := filepath.Dir(p); d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// control.group may read; changing the gear needs root (or
// control.admin_group), judged by the kernel's word on the peer
// (SO_PEERCRED). A check that may not open the socket is UNKNOWN.
func TestControlAccessByPeer(t *testing.T) {
	testenv.RequireRoot(t, "running commands as nobody")
	d := startDaemon(t, func(cfg *config.Config) { cfg.Control.Group = "nogroup" })
	openToOthers(t, gearshiftBin, d.configPath, d.cfg.Control.Socket)
	nb := func(args ...string) (string, string, int) {
		t.Helper()
		return runAsNobody(t, append(args, "--config", d.configPath)...)
	}

	if out, errOut, code := nb("status", "--json"); code != 0 || !strings.Contains(out, `"state": "light"`) {
		t.Errorf("status as a member of control.group: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := nb("check"); code != 0 {
		t.Errorf("check as a member of control.group: exit %d, %q %q", code, out, errOut)
	}
	for _, args := range [][]string{{"force", "heavy", "--for", "30m"}, {"auto"}} {
		if out, errOut, code := nb(args...); code != 1 || !strings.Contains(errOut, "needs root") {
			t.Errorf("%v as a member of control.group: exit %d, %q %q; want refused with exit 1", args, code, out, errOut)
		}
	}
	if s, err := d.status(); err != nil || s.State != "light" || s.Mode != "auto" {
		t.Errorf("after the refused force: %+v, %v", s, err)
	}
	if _, _, code := d.gs("force", "moderate"); code != 0 {
		t.Error("force as root refused")
	}

	// Out of control.group: no access at all, and check says UNKNOWN.
	if err := os.Chown(d.cfg.Control.Socket, 0, 0); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := nb("check"); code != 3 || !strings.HasPrefix(out, "GEARSHIFT UNKNOWN - ") {
		t.Errorf("check without access to the socket: exit %d, %q %q; want 3 UNKNOWN", code, out, errOut)
	}

	// A member of control.admin_group may reload and change the gear,
	// though the admin secret (0600, root's) is not for it to read.
	a := startDaemon(t, func(cfg *config.Config) {
		cfg.Control.Group, cfg.Control.AdminGroup = "nogroup", "nogroup"
	})
	openToOthers(t, a.configPath, a.cfg.Control.Socket, a.cfg.PIDFile)
	secret := a.cfg.Varnish.Targets[0].SecretFile
	if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm()&0o077 != 0 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("admin secret %s: %v, %v; want root's, 0600", secret, fi, err)
	}
	na := func(args ...string) (string, string, int) {
		t.Helper()
		return runAsNobody(t, append(args, "--config", a.configPath)...)
	}
	if out, errOut, code := na("reload"); code != 0 || !strings.HasPrefix(out, "gearshift reloaded (pid ") {
		t.Errorf("reload as a member of control.admin_group: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := na("force", "moderate"); code != 0 {
		t.Errorf("force as a member of control.admin_group: exit %d, %q %q", code, out, errOut)
	}
	if s, err := a.status(); err != nil || s.State != "moderate" || s.Mode != "forced" {
		t.Errorf("after the admin's force: %+v, %v", s, err)
	}
}

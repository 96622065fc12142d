package system

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// The package's postinst on a systemd host, on upgrade: the unit is
// try-restarted, and a daemon started by `gearshift start` outside the unit
// is restarted on the new binary too; the unit's own daemon is left to
// systemd. The script runs in a mount namespace of its own, with a private
// /run that has /run/systemd/system (systemd's mark) and a pid file naming
// a live process; systemctl, deb-systemd-* and gearshift are stand-ins
// that record their arguments.
func TestPostinstRestartsADaemonOutsideTheUnit(t *testing.T) {
	testenv.RequireRoot(t, "running postinst in a mount namespace")
	unshare := testenv.Need(t, "unshare", "util-linux")
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "deb", "postinst"))
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command("sleep", "600")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Process.Kill(); daemon.Wait() })
	pid := strconv.Itoa(daemon.Process.Pid)

	tests := []struct {
		name    string
		args    []string // postinst's
		mainPID string   // the unit's MainPID, as systemctl shows it
		want    []string
		notWant []string
	}{
		{name: "upgrade, daemon outside the unit", args: []string{"configure", "0.1.0"}, mainPID: "0",
			want: []string{"deb-systemd-invoke try-restart gearshift.service", "gearshift stop", "gearshift start"}},
		{name: "upgrade, the unit's daemon", args: []string{"configure", "0.1.0"}, mainPID: pid,
			want: []string{"deb-systemd-invoke try-restart gearshift.service"}, notWant: []string{"gearshift stop", "gearshift start"}},
		{name: "first install", args: []string{"configure"}, mainPID: "0",
			notWant: []string{"try-restart", "gearshift stop", "gearshift start"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			calls := filepath.Join(dir, "calls")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			stub := func(name, body string) {
				text := "#!/bin/sh\necho \"" + name + " $*\" >>" + calls + "\n" + body
				if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			stub("systemctl", "case \"$*\" in *MainPID*) echo "+tc.mainPID+";; esac\n")
			stub("deb-systemd-invoke", "")
			stub("deb-systemd-helper", "")
			stub("gearshift", "")
			setup := "set -e; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /var/log; " +
				"mkdir -p /run/systemd/system /run/gearshift; echo " + pid + " >/run/gearshift/gearshift.pid; " +
				"exec sh \"$0\" \"$@\""
			cmd := exec.Command(unshare, append([]string{"--mount", "--propagation", "private", "sh", "-c", setup, script}, tc.args...)...)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("postinst %s: %v\n%s", strings.Join(tc.args, " "), err, out)
			}
			b, _ := os.ReadFile(calls)
			got := string(b)
			for _, w := range tc.want {
				if !strings.Contains(got, w+"\n") {
					t.Errorf("postinst %s did not run %q; it ran:\n%s", strings.Join(tc.args, " "), w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("postinst %s ran %q; it ran:\n%s", strings.Join(tc.args, " "), w, got)
				}
			}
		})
	}
}

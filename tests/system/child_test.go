package system

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A Varnish whose cache child an operator stopped serves nothing: status
// says so per target and check is CRITICAL naming it, until the child is
// started again. gearshift does not start it itself.
func TestCheckCriticalWhenChildStopped(t *testing.T) {
	d := startDaemon(t, nil)
	admin := d.v.AdminAddr
	checkSays := func(code int, want string) {
		t.Helper()
		d.eventually(fmt.Sprintf("check exit %d with %q", code, want), 30*time.Second, func() error {
			out, errOut, got := d.gs("check")
			if got != code || !strings.Contains(out, want) {
				return fmt.Errorf("check: exit %d, %q %q", got, out, errOut)
			}
			return nil
		})
	}
	childIs := func(want string) {
		t.Helper()
		d.eventually("status child "+want, 30*time.Second, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			if len(s.Targets) != 1 || s.Targets[0].Child != want {
				return fmt.Errorf("targets %+v, want child %s", s.Targets, want)
			}
			return nil
		})
	}
	childIs("running")
	checkSays(0, "GEARSHIFT OK")

	if out, err := d.v.Adm("stop"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	childIs("stopped")
	checkSays(2, "GEARSHIFT CRITICAL - target "+admin+": varnish child stopped, nothing is served")
	if out, _ := d.v.Adm("status"); !strings.Contains(out, "stopped") {
		t.Errorf("gearshift started the child an operator stopped: %q", out)
	}

	if out, err := d.v.Adm("start"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	childIs("running")
	checkSays(0, "GEARSHIFT OK")
}

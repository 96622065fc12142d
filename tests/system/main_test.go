// Package system holds gearshift's system tests: each drives the built
// binary as an operator would (`gearshift run` before a real varnishd,
// Apache and PHP, the commands against it, the Debian package), and the
// soak (build tag soak), the idle test (build tag idle) and the
// benchmarks of whole runs (surge, flood, fleet). The tests of package
// main's own functions stay beside them in cmd/gearshift.
package system

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// gearshiftBin is the binary built once for the tests that drive gearshift
// as a user would.
var gearshiftBin string

// The exit codes of gearshift's commands (docs/operating.md), as a user
// of the binary reads them.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func TestMain(m *testing.M) {
	// The test binary run again as the hostile client (startHostile).
	if order := os.Getenv(hostileEnv); order != "" {
		os.Exit(runHostile(order))
	}
	dir, err := os.MkdirTemp("", "gearshift-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gearshiftBin = filepath.Join(dir, "gearshift")
	args := []string{"build", "-o", gearshiftBin}
	if raceEnabled {
		// go test -race checks the daemon the tests spawn too, not only
		// the test process.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/gearshift/gearshift/cmd/gearshift")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gearshift:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

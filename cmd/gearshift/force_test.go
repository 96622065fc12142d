package main

import (
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/golden"
)

func TestForceAutoHelp(t *testing.T) {
	for _, name := range []string{"force", "auto"} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runMain(t, name, "--help")
			if code != 0 || stderr != "" {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			golden.Check(t, "help/"+name+".golden", []byte(stdout))
		})
	}
	_, stdout, _ := runMain(t, "force", "--help")
	if !strings.Contains(stdout, "--for duration ") {
		t.Errorf("force --help does not name --for's value a duration:\n%s", stdout)
	}
}

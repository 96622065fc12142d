package main

import (
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
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

// force and auto print each target's gear VCL: the active VCL in active
// mode, the label's VCL in label mode (the active VCL is the operator's).
func TestPrintAppliedNamesTheGearVCL(t *testing.T) {
	for _, tc := range []struct {
		mode, want, not string
	}{
		{"active", "gearshift-heavy-1a2b3c4d", "site-router"},
		{"label", "gearshift-heavy-1a2b3c4d", "site-router"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s := &api.Status{State: "heavy", Mode: "forced", VarnishMode: tc.mode}
			ts := api.TargetStatus{Admin: "127.0.0.1:6082", Reachable: true, InSync: true, LastSwitchMS: 0.4}
			if tc.mode == "label" {
				ts.ActiveVCL, ts.LabelVCL = "site-router", "gearshift-heavy-1a2b3c4d"
			} else {
				ts.ActiveVCL = "gearshift-heavy-1a2b3c4d"
			}
			s.Targets = []api.TargetStatus{ts}
			var b strings.Builder
			if code, err := printApplied(&b, s, ""); code != exitOK || err != nil {
				t.Fatalf("printApplied = %d, %v", code, err)
			}
			if out := b.String(); !strings.Contains(out, "127.0.0.1:6082: "+tc.want+" (0.40 ms)") || strings.Contains(out, tc.not) {
				t.Errorf("%s mode printed %q, want the gear VCL %s", tc.mode, out, tc.want)
			}
		})
	}
}

package top

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/golden"
	"github.com/gearshift/gearshift/profiles"
)

const doc = "../../docs/reasons.md"

// TestDocsReasons keeps docs/reasons.md's table of reason words and its
// sample screen in step with the code.
func TestDocsReasons(t *testing.T) {
	var b strings.Builder
	b.WriteString("\n| word | meaning | what changes it |\n|---|---|---|\n")
	for _, r := range profiles.Reasons {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Word, r.Meaning, r.Setting)
	}
	golden.CheckBlock(t, doc,
		"<!-- reasons: generated from profiles.Reasons; go test ./controller/top -run DocsReasons -update -->\n",
		"<!-- /reasons -->", "table of reason words", b.String()+"\n")

	var screen bytes.Buffer
	now := time.Date(2025, 3, 14, 3, 12, 5, 0, time.UTC)
	if err := WriteScreen(&screen, surge().View("site", ByReason, 20, 5), now, false); err != nil {
		t.Fatal(err)
	}
	golden.CheckBlock(t, doc,
		"<!-- screen: generated from controller/top's test surge; go test ./controller/top -run DocsReasons -update -->\n",
		"<!-- /screen -->", "sample screen", "\n```\n$ gearshift top\n"+strings.TrimRight(screen.String(), "\n")+"\n```\n\n")
}

// TestReasonsRendered checks that every reason word is one a built-in
// profile can log, and that the profiles log only those (rendering fails
// on another).
func TestReasonsRendered(t *testing.T) {
	var all strings.Builder
	site := profiles.Site{Options: profiles.DefaultOptions(), Backend: profiles.DefaultBackend, GuestSecret: profiles.RedactedGuestSecret}
	set, err := profiles.Build(site)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range set {
		all.WriteString(p.VCL)
	}
	// Some words are a config with sites' alone.
	site.Routes = []profiles.Route{{Site: profiles.DefaultSite, MaxConnections: 10}}
	site.Backend.MaxConnections = 20
	if set, err = profiles.Build(site); err != nil {
		t.Fatal(err)
	}
	for _, p := range set {
		all.WriteString(p.VCL)
	}
	for _, r := range profiles.Reasons {
		if !strings.Contains(all.String(), `"`+r.Word+`"`) {
			t.Errorf("no built-in profile logs %q", r.Word)
		}
	}
}

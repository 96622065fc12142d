package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// aliasBomb is a "billion laughs" config of about size bytes: levels of
// anchored lists, each one the previous one width times, under keys the
// decoder knows.
func aliasBomb(size int) string {
	const levels = 9
	for width := 2; ; width++ {
		var b strings.Builder
		b.WriteString("profiles:\n  never_cache:\n")
		b.WriteString("    - &l0 [" + strings.TrimSuffix(strings.Repeat(`"lol",`, width), ",") + "]\n")
		for l := 1; l < levels; l++ {
			b.WriteString(fmt.Sprintf("    - &l%d [", l) + strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", l-1), width), ",") + "]\n")
		}
		fmt.Fprintf(&b, "states: { heavy: { enter: *l%d, stay: *l%d } }\npoll_interval: *l%d\n", levels-1, levels-1, levels-1)
		if b.Len() >= size {
			return b.String()
		}
	}
}

// A config whose aliases expand past MaxAliasValues is refused at once,
// with one sentence: the 5.6 KB and 39 KB bombs of issue 30 took seconds
// and minutes of CPU and gave tens of thousands of problems. (A rule
// reused by alias is fine: TestParseValid.)
func TestAliasBombsRefused(t *testing.T) {
	r := fixture(t)
	for _, size := range []int{5600, 39000} {
		doc := r.Replace(base) + aliasBomb(size)
		t.Run(fmt.Sprintf("%d bytes", len(doc)), func(t *testing.T) {
			for name, parse := range map[string]func([]byte) (*Config, error){"Parse": Parse, "ParseSettings": ParseSettings} {
				_, err := parse([]byte(doc))
				var ce *Error
				if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(err.Error(), AliasProblem) {
					t.Fatalf("%s of an alias bomb = %.300v, want the one problem %q", name, err, AliasProblem)
				}
			}
			path := filepath.Join(t.TempDir(), "gearshift.yaml")
			os.WriteFile(path, []byte(doc), 0o644)
			if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "config "+path+": "+AliasProblem+" (*l") {
				t.Errorf("Load = %.300v", err)
			}
			if _, err := LoadLenient(path); err == nil || !strings.Contains(err.Error(), AliasProblem) {
				t.Errorf("LoadLenient = %.300v", err)
			}
		})
	}
	// A bomb whose anchors sit under a key no one reads, aliased by a
	// duration: yaml.v3 would expand it on its own, so it is paid for first.
	bomb := strings.Replace(aliasBomb(5600), "profiles:\n  never_cache:", "x_anchors:", 1)
	bomb = bomb[:strings.Index(bomb, "states:")] + "poll_interval: *l8\n"
	if _, err := Parse([]byte(r.Replace(base) + bomb)); err == nil || !strings.Contains(err.Error(), AliasProblem+" (*l8)") {
		t.Errorf("a bomb behind a duration: %.300v", err)
	}
	// An anchor that no alias uses repeats nothing: it is accepted.
	if _, err := Parse([]byte(r.Replace(base) + "poll_interval: &p 2s\n")); err != nil {
		t.Errorf("an anchor alone: %v", err)
	}
}

// The problem list is bounded: a file of thousands of unknown keys is
// answered with the first MaxProblems and a count of the rest.
func TestProblemsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "unknown_%d: 1\n", i)
	}
	_, err := Parse([]byte(b.String()))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v", err)
	}
	if len(ce.Problems) != MaxProblems+1 || !strings.Contains(ce.Problems[MaxProblems].Msg, "and 4900 more problems") {
		t.Errorf("got %d problems, the last %q; want %d and a count of the rest", len(ce.Problems), ce.Problems[len(ce.Problems)-1], MaxProblems+1)
	}
}

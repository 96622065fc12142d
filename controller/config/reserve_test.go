package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/profiles"
)

func TestSessionReserveValid(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want profiles.Reserve
		// effective is the reserve against max_connections 150.
		effective int
	}{
		{"the default", base, profiles.ReserveAuto, 38},
		{"auto written", base + "backend: { session_reserve: auto }\n", profiles.ReserveAuto, 38},
		{"off", base + "backend: { session_reserve: 0 }\n", 0, 0},
		{"a number", base + "backend: { max_connections: 150, session_reserve: 10 }\n", 10, 10},
		{"one below max_connections", base + "backend: { max_connections: 150, session_reserve: 149 }\n", 149, 149},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(fixture(t).Replace(tc.doc)))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.Backend.SessionReserve; got != tc.want {
				t.Errorf("session_reserve = %v, want %v", got, tc.want)
			}
			if got := c.Backend.Reserve(150); got != tc.effective {
				t.Errorf("Reserve(150) = %d, want %d", got, tc.effective)
			}
			// config show writes what Parse reads back.
			b, err := c.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "session_reserve: "+tc.want.String()+"\n") {
				t.Errorf("config show has no session_reserve: %s:\n%s", tc.want, b)
			}
			back, err := ParseSettings(b)
			if err != nil {
				t.Fatalf("config show's output does not parse: %v", err)
			}
			if back.Backend.SessionReserve != tc.want {
				t.Errorf("read back: session_reserve = %v, want %v", back.Backend.SessionReserve, tc.want)
			}
		})
	}
}

func TestSessionReserveProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"negative", base + "backend:\n  max_connections: 20\n  session_reserve: -1\n",
			"backend.session_reserve: must be auto, 0 (off) or a number of connections, got -1 (line 4)"},
		{"max_connections", base + "backend:\n  max_connections: 20\n  session_reserve: 20\n",
			"backend.session_reserve: 20 is not below backend.max_connections (20): anonymous visitors would have no connection left (line 4)"},
		{"more than max_connections", base + "backend: { max_connections: 8, session_reserve: 30 }\n",
			"backend.session_reserve: 30 is not below backend.max_connections (8): anonymous visitors would have no connection left (line 2)"},
		{"not a number", base + "backend:\n  session_reserve: quarter\n",
			`backend.session_reserve: want auto or a number of connections, got "quarter" (line 3)`},
		{"a fraction", base + "backend:\n  session_reserve: 2.5\n",
			`backend.session_reserve: want auto or a number of connections, got "2.5" (line 3)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(fixture(t).Replace(tc.doc)))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error = %v, want an *Error", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != tc.want {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}

// TestSessionReserveDefault pins the automatic reserve: a quarter,
// rounded up, of a limit of 4 or more, as Apache's prefork pools (16 to
// 150 workers) and PHP-FPM's (5 children and up) have, and none below.
func TestSessionReserveDefault(t *testing.T) {
	b := profiles.Backend{SessionReserve: profiles.ReserveAuto}
	for _, tc := range []struct{ max, want int }{
		{1, 0}, {2, 0}, {3, 0}, {4, 1}, {5, 2}, {8, 2}, {16, 4}, {25, 7}, {150, 38},
	} {
		if got := b.Reserve(tc.max); got != tc.want {
			t.Errorf("auto reserve of %d connections = %d, want %d", tc.max, got, tc.want)
		}
	}
	// A number written is kept below the limit: anonymous visitors keep one.
	if got := (profiles.Backend{SessionReserve: 9}).Reserve(4); got != 3 {
		t.Errorf("reserve 9 of 4 connections = %d, want 3", got)
	}
	if got := (profiles.Backend{SessionReserve: 0}).Reserve(150); got != 0 {
		t.Errorf("reserve 0 = %d, want 0 (off)", got)
	}
}

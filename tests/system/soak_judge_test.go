//go:build soak

package system

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSoakJudgement: the soak's growth and ban checks judge only on
// samples they read, and the ban bound follows the bans the run caused.
func TestSoakJudgement(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	// samples are n readings 10 s apart of value(i), -1 for none.
	samples := func(n int, value func(i int) float64) []soakSample {
		xs := make([]soakSample, n)
		for i := range xs {
			v := value(i)
			xs[i] = soakSample{at: t0.Add(time.Duration(i) * 10 * time.Second), rss: v, gor: v, fds: v, bans: v}
		}
		return xs
	}
	unread := func(int) float64 { return -1 }
	fds := func(x soakSample) float64 { return x.fds }

	growths := []struct {
		name string
		xs   []soakSample
		want float64 // growth; -1: an error
	}{
		{"flat", samples(9, func(int) float64 { return 20 }), 0},
		{"one a sample", samples(9, func(i int) float64 { return float64(20 + i) }), 8},
		{"none read", samples(9, unread), -1},
		{"two of nine read", samples(9, func(i int) float64 {
			if i < 2 {
				return 20
			}
			return -1
		}), -1},
		{"no samples", nil, -1},
	}
	for _, tc := range growths {
		t.Run("growth/"+tc.name, func(t *testing.T) {
			g, err := growthOf(tc.xs, fds)
			switch {
			case tc.want < 0 && err == nil:
				t.Errorf("growth %.2f, want an error: too few samples to judge", g)
			case tc.want >= 0 && err != nil:
				t.Errorf("error %v, want a growth of %.0f", err, tc.want)
			case tc.want >= 0 && (g < tc.want-0.01 || g > tc.want+0.01):
				t.Errorf("growth %.2f, want %.0f", g, tc.want)
			}
		})
	}

	// Three minutes: a shift every 1.5 s, one in three to heavy (40), a
	// signed-in write every half second (360).
	const run = 18
	var heavy []time.Time
	for at := t0; at.Before(t0.Add(3 * time.Minute)); at = at.Add(4500 * time.Millisecond) {
		heavy = append(heavy, at)
	}
	heavyBy := func(i int) float64 {
		n := 0
		for _, at := range heavy {
			if !at.After(t0.Add(time.Duration(i) * 10 * time.Second)) {
				n++
			}
		}
		return float64(1 + n)
	}
	life := 80 * time.Minute
	bans := []struct {
		name string
		xs   []soakSample
		ok   bool
	}{
		{"a ban at each shift to heavy", samples(run, heavyBy), true},
		{"a ban at each write too", samples(run, func(i int) float64 { return heavyBy(i) + float64(20*i) }), false},
		{"a ban at each shift", samples(run, func(i int) float64 { return 3 * heavyBy(i) }), false},
		{"none read", samples(run, unread), false},
	}
	for _, tc := range bans {
		t.Run("bans/"+tc.name, func(t *testing.T) {
			err := judgeBans(tc.xs, heavy, life)
			if tc.ok && err != nil {
				t.Errorf("judgeBans: %v, want none", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "MAIN.bans")) {
				t.Errorf("judgeBans: %v, want MAIN.bans past its bound or unread", err)
			}
		})
	}
}

// TestSoakJudgeChildKilled: a shift commanded as the cache child is
// killed is judged from when the child serves again (its manager answers
// vcl.list all along); one commanded otherwise from when it was
// commanded, as before.
func TestSoakJudgeChildKilled(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	watch := func(seenAt int) []vclSample {
		var w []vclSample
		for ms := -500; ms <= 3000; ms += 50 {
			g := "light"
			if ms >= seenAt {
				g = "heavy"
			}
			w = append(w, vclSample{at: at(ms), ok: true, active: g, loaded: 4, ours: 3})
		}
		return w
	}
	for _, tc := range []struct {
		name    string
		windows []faultWindow
		seenAt  int
		want    bool
	}{
		{"no fault, seen at once", nil, 100, true},
		{"no fault, seen late", nil, 650, false},
		{"child killed, seen once it serves", []faultWindow{{"child", at(-10), at(600)}}, 650, true},
		{"child killed, seen long after it serves", []faultWindow{{"child", at(-10), at(600)}}, 1400, false},
		{"another fault is no excuse", []faultWindow{{"hook", at(-10), at(600)}}, 650, false},
	} {
		s := &soak{watch: watch(tc.seenAt), windows: tc.windows}
		shifts := []shift{{at: at(16), to: "heavy"}}
		s.judge(shifts)
		if shifts[0].seen != tc.want {
			t.Errorf("%s: seen %v, want %v", tc.name, shifts[0].seen, tc.want)
		}
	}
}

// TestSoakJudgeVisitors: the soak fails when Apache's log names 127.0.0.1
// for most requests (the visitors came as a local tool), or never the
// crowd or alice.
func TestSoakJudgeVisitors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, log string
		want      string // in the error; "" for none
	}{
		{"as themselves", "198.51.100.1 x\n192.0.2.9 x\n203.0.113.1 x\n127.0.0.1 x\n", ""},
		{"as a local tool", "198.51.100.1 x\n203.0.113.1 x\n127.0.0.1 x\n127.0.0.1 x\n", "2 of 127.0.0.1"},
		{"no alice", "198.51.100.1 x\n192.0.2.9 x\n", "0 of alice"},
		{"no crowd", "203.0.113.1 x\n", "0 requests of the crowd"},
	} {
		file := filepath.Join(dir, c.name)
		os.WriteFile(file, []byte(c.log), 0o644)
		err := judgeVisitors(file)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

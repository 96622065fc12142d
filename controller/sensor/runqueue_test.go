package sensor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestOwnTasksNotCounted reads fake proc trees whose /proc/stat says
// procs_running 7, procs_blocked 2, and whose self/task holds the
// daemon's own threads in various states.
func TestOwnTasksNotCounted(t *testing.T) {
	tests := []struct {
		root string
		own  int // own tasks running or blocked; -1: none readable
		want int
	}{
		// Two threads running (the reader and one more), one blocked, three
		// sleeping, one of them with ") S (" in its name.
		{root: "own-tasks", own: 3, want: 9 - 3},
		// No thread seen running (it ended between the reads): the
		// reader itself still ran.
		{root: "own-none", own: 0, want: 9 - 1},
		// No self/task at all: only the reader is subtracted.
		{root: "no-psi", own: -1, want: 9 - 1},
	}
	for _, tc := range tests {
		t.Run(tc.root, func(t *testing.T) {
			root := filepath.Join("testdata", tc.root)
			n, ok := ownBusy(root)
			if tc.own < 0 {
				if ok {
					t.Errorf("ownBusy(%s) = %d, ok; want not ok (no self/task)", root, n)
				}
			} else if !ok || n != tc.own {
				t.Errorf("ownBusy(%s) = %d, %v; want %d, true", root, n, ok, tc.own)
			}
			s, err := newProc(root, 4).Sample(context.Background())
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if s.Runnable != float64(tc.want) {
				t.Errorf("Runnable = %v, want %d", s.Runnable, tc.want)
			}
		})
	}
}

// TestOwnTasksThatRanCounted: a thread of the daemon asleep at the look
// after the read, whose time on a CPU moved since the look before, ran in
// between and is the daemon's; one whose time stood still is not.
func TestOwnTasksThatRanCounted(t *testing.T) {
	root := t.TempDir()
	for tid, f := range map[string]struct{ stat, schedstat string }{
		"100": {"100 (gearshift) R 1", "5000 10 3\n"}, // the reader
		"101": {"101 (gearshift) S 1", "7000 20 9\n"}, // ran in between
		"102": {"102 (gearshift) S 1", "9000 30 4\n"}, // slept throughout
		"103": {"103 (gearshift) S 1", "1000 10 1\n"}, // new since the look before
	} {
		dir := filepath.Join(root, "self", "task", tid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "stat"), []byte(f.stat), 0o644)
		os.WriteFile(filepath.Join(dir, "schedstat"), []byte(f.schedstat), 0o644)
	}
	before := map[string]uint64{"100": 4000, "101": 6500, "102": 9000}
	if got := ownRunTimes(root); got["101"] != 7000 || got["102"] != 9000 || len(got) != 4 {
		t.Errorf("ownRunTimes = %v, want the first schedstat field of each of the 4 tasks", got)
	}
	if n, ok := ownBusySince(root, before); !ok || n != 2 {
		t.Errorf("ownBusySince = %d, %v; want 2 (the reader running, 101 ran in between)", n, ok)
	}
	if n, _ := ownBusySince(root, nil); n != 1 {
		t.Errorf("ownBusySince without a look before = %d, want 1 (the running reader)", n)
	}
}

func TestTaskState(t *testing.T) {
	tests := map[string]byte{
		"4100 (gearshift) R 1 1 1":      'R',
		"4102 (gear shift) S (x) D 1 1": 'D',
		"4103 (a)) S 1":                 'S',
		"4104 (gearshift)":              0,
		"garbage":                       0,
		"":                              0,
	}
	for line, want := range tests {
		if got := taskState([]byte(line)); got != want {
			t.Errorf("taskState(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestRunnable(t *testing.T) {
	tests := []struct {
		running, blocked, own, want int
	}{
		{running: 1, own: 1, want: 0},             // only the reader
		{running: 2, own: 2, want: 0},             // the reader and a runtime thread
		{running: 5, blocked: 1, own: 2, want: 4}, // others' work stays
		{running: 3, blocked: 2, own: 3, want: 2}, // own blocked tasks go too
		{running: 4, own: 0, want: 3},             // the reader always ran
		{running: 0, own: 0, want: 0},             // never negative
		{running: 1, own: 4, want: 0},             // own tasks read a moment later
	}
	for _, tc := range tests {
		if got := runnable(tc.running, tc.blocked, tc.own); got != tc.want {
			t.Errorf("runnable(running %d, blocked %d, own %d) = %d, want %d", tc.running, tc.blocked, tc.own, got, tc.want)
		}
	}
}

func TestProcsCountsErrors(t *testing.T) {
	buf := make([]byte, 4096)
	if _, _, err := procsCounts("testdata/nowhere/stat", buf); err == nil {
		t.Error("a missing /proc/stat: want an error")
	}
	if _, _, err := procsCounts("testdata/no-psi/meminfo", buf); err == nil {
		t.Error("a file without procs_running: want an error")
	}
	r, b, err := procsCounts("testdata/no-psi/stat", buf)
	if err != nil || r != 7 || b != 2 {
		t.Errorf("procsCounts = %d, %d, %v; want 7, 2", r, b, err)
	}
}

// TestRunQueueMean: a poll gets the mean of the background reads since the
// poll before; with none since, the latest read.
func TestRunQueueMean(t *testing.T) {
	done := make(chan struct{})
	q := &runQueue{root: filepath.Join("testdata", "own-tasks"), done: done, first: make(chan struct{})}
	q.start.Do(func() {}) // no background reads
	close(q.first)
	q.sum, q.n, q.last = 7, 2, 4
	if got, err := q.take(); err != nil || got != 3.5 {
		t.Errorf("take = %v, %v; want the mean 3.5", got, err)
	}
	if got, err := q.take(); err != nil || got != 4 {
		t.Errorf("take with no read since = %v, %v; want the latest read, 4", got, err)
	}

	// No background read within firstReadWait: the poll reads, and
	// says why it cannot.
	q = &runQueue{root: filepath.Join("testdata", "nowhere"), first: make(chan struct{})}
	q.start.Do(func() {})
	if _, err := q.take(); err == nil {
		t.Error("take with no /proc/stat: want an error")
	}

	// The background reads of the fixture: 6 each.
	q = &runQueue{root: filepath.Join("testdata", "own-tasks"), done: done}
	defer close(done)
	q.take() // starts them
	deadline := time.Now().Add(time.Minute)
	for {
		q.mu.Lock()
		n := q.n
		q.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d background reads in a minute, want at least 2", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := q.take(); err != nil || got != 6 {
		t.Errorf("take after background reads = %v, %v; want 6", got, err)
	}
}

// The spacings of the background reads vary around runQueueEvery, so the
// reads do not keep meeting another periodic task.
func TestNextReadSpread(t *testing.T) {
	var sum time.Duration
	lo, hi := time.Hour, time.Duration(0)
	const n = 10000
	for range n {
		d := nextRead()
		sum += d
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < runQueueEvery/2 || hi >= runQueueEvery*3/2 {
		t.Errorf("spacings from %s to %s, want within [%s, %s)", lo, hi, runQueueEvery/2, runQueueEvery*3/2)
	}
	if mean := sum / n; mean < runQueueEvery*95/100 || mean > runQueueEvery*105/100 {
		t.Errorf("mean spacing %s, want about %s", mean, runQueueEvery)
	}
	if hi-lo < runQueueEvery/2 {
		t.Errorf("spacings from %s to %s: too little spread", lo, hi)
	}
}

package sensor

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The fast signal's run queue is the kernel's procs_running +
// procs_blocked, an instant's count. Read from the poll's goroutine, that
// instant is always one at which gearshift itself is busy: the reading
// thread runs, and so, often, does the thread the Go runtime woke to hand
// the poll's goroutine a CPU, on its way back to sleep. On an idle 2-CPU
// machine that added about one task to every reading, a load_per_cpu of
// 0.5 from nothing: moderate's stay threshold.
//
// So the run queue is read apart from the poll: a thread of its own,
// woken by the kernel's timer rather than the Go scheduler, reads it about
// ten times a second, at random spacings, with plain system calls, counts
// at once the daemon's own tasks that are running or blocked or ran during
// the read, and subtracts them; a poll takes the mean of the reads since
// the one before. See docs/signals.md.

// runQueueEvery is the mean spacing of the background reads. Each spacing
// is drawn from 50% to 150% of it: reads at a fixed period would keep
// meeting whatever else wakes at that period (other daemons started at the
// same moment, another periodic job), and count it every time.
const runQueueEvery = 100 * time.Millisecond

// nextRead is a spacing of the background reads (see runQueueEvery).
func nextRead() time.Duration {
	return runQueueEvery/2 + rand.N(runQueueEvery)
}

// runQueue reads the run queue, less the daemon's own tasks, in the
// background, and hands each poll the mean since the poll before.
type runQueue struct {
	root string
	done <-chan struct{} // closed: the background reads stop (tests); nil in the daemon

	start sync.Once
	first chan struct{} // closed at the first background read

	mu   sync.Mutex
	sum  int // since the last take
	n    int
	last int // the latest read
}

// firstReadWait bounds the wait of the first poll for the first
// background read.
const firstReadWait = time.Second

// take returns the mean run queue since the last take; the latest read
// when none was made since (polls closer than runQueueEvery). The first
// poll waits for the first read; only when that does not come is the run
// queue read from the poll, which reports why it cannot be.
func (q *runQueue) take() (float64, error) {
	q.start.Do(func() {
		q.first = make(chan struct{})
		go q.loop()
	})
	select {
	case <-q.first:
	case <-time.After(firstReadWait):
		return readRunQueueOnce(q.root)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return float64(q.last), nil
	}
	mean := float64(q.sum) / float64(q.n)
	q.sum, q.n = 0, 0
	return mean, nil
}

// loop reads every runQueueEvery on a thread of its own, for the life of
// the process. A read that fails is left out; the poll's own read then
// reports the error.
func (q *runQueue) loop() {
	runtime.LockOSThread()
	buf := make([]byte, statBufSize)
	var once sync.Once
	for {
		select {
		case <-q.done:
			return
		default:
		}
		// nanosleep(2) directly: the kernel wakes this thread, no other.
		ts := unix.NsecToTimespec(nextRead().Nanoseconds())
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
		r, err := readRunQueue(q.root, buf)
		if err != nil {
			continue
		}
		q.mu.Lock()
		q.sum += r
		q.n++
		q.last = r
		q.mu.Unlock()
		once.Do(func() { close(q.first) })
	}
}

// statBufSize holds /proc/stat whole on machines with many CPUs and IRQs.
const statBufSize = 64 << 10

// readRunQueueOnce is one read of readRunQueue with a buffer of its own.
func readRunQueueOnce(root string) (float64, error) {
	n, err := readRunQueue(root, make([]byte, statBufSize))
	return float64(n), err
}

// readRunQueue reads procs_running + procs_blocked from <root>/stat and
// subtracts the daemon's tasks that may have been counted: those running
// or blocked just after, and those that ran between a look just before
// and that one. The second kind matters: the Go runtime wakes a thread or
// two for a few microseconds as the reading thread returns from its
// sleep, and such a thread, counted by the kernel, has often gone back to
// sleep by the time the tasks are read (an idle machine's 2 CPUs seemed
// 0.2 busier than they were). buf holds /proc/stat.
func readRunQueue(root string, buf []byte) (int, error) {
	before := ownRunTimes(root)
	running, blocked, err := procsCounts(filepath.Join(root, "stat"), buf)
	if err != nil {
		return 0, err
	}
	own, _ := ownBusySince(root, before)
	return runnable(running, blocked, own), nil
}

// ownRunTimes reads each task's time on a CPU so far (the first field of
// <root>/self/task/*/schedstat, nanoseconds), by task id; nil when the
// kernel keeps no schedstat.
func ownRunTimes(root string) map[string]uint64 {
	dir := filepath.Join(root, "self", "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	times := make(map[string]uint64, len(tasks))
	var buf [128]byte
	for _, t := range tasks {
		if ns, ok := runTime(filepath.Join(dir, t.Name(), "schedstat"), buf[:]); ok {
			times[t.Name()] = ns
		}
	}
	return times
}

// runTime is the first number of a schedstat file.
func runTime(path string, buf []byte) (uint64, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, false
	}
	field, _, _ := bytes.Cut(bytes.TrimSpace(buf[:n]), []byte(" "))
	ns, err := strconv.ParseUint(string(field), 10, 64)
	return ns, err == nil
}

// procsCounts reads the procs_running and procs_blocked lines of a
// /proc/stat file with one read into buf.
func procsCounts(path string, buf []byte) (running, blocked int, err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil {
		return 0, 0, &os.PathError{Op: "read", Path: path, Err: err}
	}
	b := buf[:max(n, 0)]
	if running, err = statField(b, "procs_running"); err != nil {
		return 0, 0, &os.PathError{Op: "parse", Path: path, Err: err}
	}
	if blocked, err = statField(b, "procs_blocked"); err != nil {
		return 0, 0, &os.PathError{Op: "parse", Path: path, Err: err}
	}
	return running, blocked, nil
}

// statField is the number on the line "key N" of /proc/stat.
func statField(b []byte, key string) (int, error) {
	i := bytes.Index(b, []byte("\n"+key+" "))
	if i < 0 {
		return 0, strconv.ErrSyntax
	}
	line := b[i+len(key)+2:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	return strconv.Atoi(string(bytes.TrimSpace(line)))
}

// ownBusy counts the tasks (threads) of this process that are running or
// in uninterruptible sleep, the states procs_running and procs_blocked
// count, as <root>/self/task/*/stat shows them. ok is false when the
// tasks cannot be read.
func ownBusy(root string) (n int, ok bool) { return ownBusySince(root, nil) }

// ownBusySince is ownBusy, also counting the tasks whose time on a CPU
// moved since before (ownRunTimes): they ran in between.
func ownBusySince(root string, before map[string]uint64) (n int, ok bool) {
	dir := filepath.Join(root, "self", "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var buf [512]byte
	for _, t := range tasks {
		fd, err := unix.Open(filepath.Join(dir, t.Name(), "stat"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // a thread that ended since the listing
		}
		m, err := unix.Read(fd, buf[:])
		unix.Close(fd)
		if err != nil {
			continue
		}
		switch taskState(buf[:max(m, 0)]) {
		case 'R', 'D':
			n++
			continue
		}
		if was, seen := before[t.Name()]; seen {
			if now, ok := runTime(filepath.Join(dir, t.Name(), "schedstat"), buf[:]); ok && now != was {
				n++
			}
		}
	}
	return n, true
}

// taskState is the state letter of a /proc/<pid>/task/<tid>/stat line,
// the field after the command name in parentheses (which may itself hold
// spaces and parentheses, hence the last ')').
func taskState(stat []byte) byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// runnable is the run queue without gearshift's own work: procs_running +
// procs_blocked less own, the daemon's tasks running or blocked at the
// read. own is at least 1, the reader itself, even when the tasks could
// not be read.
func runnable(running, blocked, own int) int {
	return max(running+blocked-max(own, 1), 0)
}

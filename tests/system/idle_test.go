//go:build idle

// The idle test needs the machine to itself: make test runs it alone,
// after the other packages (go test -tags idle -run TestIdle).

package system

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// runQueueReader is an independent reader of the run queue: bash builtins
// only (no thread, no child), ten reads a second of procs_running +
// procs_blocked from /proc/stat, less itself, for $1 seconds; it prints
// the sum and the number of reads. A FIFO opened read-write that nobody
// writes to is its clock: read -t waits without a child process.
const runQueueReader = `
exec 3<>"$2"
sum=0 n=0
while (( SECONDS < $1 )); do
	while read -r k v _; do
		case $k in
		procs_running) r=$v ;;
		procs_blocked) b=$v ;;
		esac
	done </proc/stat
	sum=$(( sum + r + b - 1 )) n=$(( n + 1 ))
	read -t 0.1 -u 3 _ || true
done
echo "$sum $n"
`

// TestIdle: on an otherwise idle machine, the daemon with the default
// config reads the run queue as an independent reader in another process
// does (mean within 0.2), and stays in light: for 60 s at poll_interval
// 500ms, then 60 s at 1s.
func TestIdle(t *testing.T) {
	const window = 60 * time.Second
	v := varnishtest.Start(t, varnishtest.Config{})
	_, _, be := backend(t)
	for _, interval := range []time.Duration{500 * time.Millisecond, time.Second} {
		t.Run(interval.String(), func(t *testing.T) {
			waitQuiet(t)
			path, cfg := configtest.ForVarnish(t, v, func(cfg *config.Config) {
				// The default config: its rules, windows and dwell.
				cfg.Backend = be
				cfg.PollInterval = timefmt.Duration(interval)
				cfg.Log.Level = "debug"
			})
			d := spawnDaemon(t, v, path, "NOTIFY_SOCKET=")
			d.cfg = cfg
			defer func() {
				if d.running() {
					d.cmd.Process.Signal(syscall.SIGTERM)
					<-d.exited
				}
			}()
			d.eventually("daemon in sync on light", 90*time.Second, func() error {
				s, err := d.status()
				if err != nil {
					return err
				}
				return inSync(s, "light")
			})
			// From here on, the daemon's samples and the reader's cover
			// the same window.
			from := time.Now()
			indep := readRunQueue(t, window)
			to := time.Now()

			polls, states, mean := daemonRunQueue(t, cfg.Log.File, from, to)
			if want := int(window/interval) * 8 / 10; polls < want {
				t.Fatalf("%d polls logged in %s, want at least %d", polls, window, want)
			}
			t.Logf("poll_interval %s: daemon's mean runnable %.3f over %d polls, the independent reader's %.3f; load1 %s",
				interval, mean, polls, indep, loadavg(t))
			if math.Abs(mean-indep) > 0.2 {
				t.Errorf("daemon's mean runnable %.3f, independent reader's %.3f: more than 0.2 apart", mean, indep)
			}
			for st, n := range states {
				if st != "light" {
					t.Errorf("%d polls in %s on an idle machine, want light throughout", n, st)
				}
			}
			s, err := d.status()
			if err != nil {
				t.Fatal(err)
			}
			if s.State != "light" || s.Transitions != 0 {
				t.Errorf("status: state %s after %d transitions, want light and none", s.State, s.Transitions)
			}
		})
	}
}

// waitQuiet waits until Load1 is below half of moderate's default enter
// threshold, so that what an earlier test left in the one-minute average
// cannot move the gear; four minutes at most.
func waitQuiet(t *testing.T) {
	t.Helper()
	limit := 0.35 * float64(runtime.NumCPU())
	deadline := time.Now().Add(4 * time.Minute)
	for {
		l := loadavg(t)
		l1, _ := strconv.ParseFloat(strings.Fields(l)[0], 64)
		if l1 < limit {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("load average %s: the machine is not idle (want Load1 < %.2f); run this test alone", l, limit)
		}
		time.Sleep(5 * time.Second)
	}
}

func loadavg(t *testing.T) string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// readRunQueue runs the independent reader for d and returns its mean.
func readRunQueue(t *testing.T, d time.Duration) float64 {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "clock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-c", runQueueReader, "reader", strconv.Itoa(int(d/time.Second)), fifo).Output()
	if err != nil {
		t.Fatalf("run-queue reader: %v", err)
	}
	var sum, n int
	if _, err := fmt.Sscan(string(out), &sum, &n); err != nil || n == 0 {
		t.Fatalf("run-queue reader printed %q", out)
	}
	return float64(sum) / float64(n)
}

// daemonRunQueue reads the daemon's debug log between from and to: the
// number of polls, the polls in each gear, the mean run queue.
func daemonRunQueue(t *testing.T, logFile string, from, to time.Time) (polls int, states map[string]int, mean float64) {
	t.Helper()
	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	states = map[string]int{}
	sum := 0.0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			TS       string   `json:"ts"`
			Msg      string   `json:"msg"`
			State    string   `json:"state"`
			To       string   `json:"to"`
			Runnable *float64 `json:"runnable"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		ts, err := time.Parse(time.RFC3339Nano, e.TS)
		if err != nil {
			t.Fatalf("log line %q: ts: %v", sc.Text(), err)
		}
		if ts.Before(from) || ts.After(to) {
			continue
		}
		if e.Msg == logging.MsgStateChange {
			t.Errorf("idle machine, yet %s", sc.Text())
			states[e.To]++
		}
		if e.Msg != "no state change" || e.Runnable == nil {
			continue
		}
		polls++
		states[e.State]++
		sum += *e.Runnable
	}
	if polls > 0 {
		mean = sum / float64(polls)
	}
	return polls, states, mean
}

// Package sdnotify tells systemd about the daemon's state (Type=notify
// units) through the datagram socket named by $NOTIFY_SOCKET.
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Notify sends state ("READY=1", "STATUS=gear heavy", "STOPPING=1", …
// joined by newlines) to systemd. Without $NOTIFY_SOCKET it does nothing
// and returns false, nil.
func Notify(state ...string) (sent bool, err error) {
	return send(os.Getenv("NOTIFY_SOCKET"), state)
}

// Notifier sends to the socket $NOTIFY_SOCKET named when it was made.
type Notifier struct {
	path       string
	untilReady bool
	done       atomic.Bool
}

// New returns a Notifier for $NOTIFY_SOCKET. With untilReady it falls
// silent once it has sent READY=1: the listener (`gearshift start`
// waiting for a detached daemon) wants the readiness and nothing after.
func New(untilReady bool) *Notifier {
	return &Notifier{path: os.Getenv("NOTIFY_SOCKET"), untilReady: untilReady}
}

// Notify sends state as the package's Notify does.
func (n *Notifier) Notify(state ...string) (sent bool, err error) {
	if n == nil || n.done.Load() {
		return false, nil
	}
	sent, err = send(n.path, state)
	if n.untilReady {
		for _, s := range state {
			if s == "READY=1" {
				n.done.Store(true)
			}
		}
	}
	return sent, err
}

func send(path string, state []string) (bool, error) {
	if path == "" {
		return false, nil
	}
	if strings.HasPrefix(path, "@") {
		path = "\x00" + path[1:] // an abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(state, "\n"))); err != nil {
		return false, err
	}
	return true, nil
}

// WatchdogInterval returns how often the service must send WATCHDOG=1:
// half of $WATCHDOG_USEC, as sd_watchdog_enabled(3) advises, or 0 when the
// watchdog is off or meant for another process ($WATCHDOG_PID).
func WatchdogInterval() (time.Duration, error) {
	us := os.Getenv("WATCHDOG_USEC")
	if us == "" {
		return 0, nil
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return 0, fmt.Errorf("WATCHDOG_PID %q is not a pid", p)
		}
		if pid != os.Getpid() {
			return 0, nil
		}
	}
	n, err := strconv.ParseInt(us, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC %q is not a positive number of microseconds", us)
	}
	return time.Duration(n) * time.Microsecond / 2, nil
}

// Reloading is the message that starts a reload: RELOADING=1 with the
// CLOCK_MONOTONIC time, which systemd 253 and later require of
// Type=notify-reload services and accept from any.
func Reloading() []string {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return []string{"RELOADING=1"}
	}
	return []string{"RELOADING=1", "MONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10)}
}

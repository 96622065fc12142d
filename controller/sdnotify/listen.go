package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Listener is the other end of the protocol: a notify socket of the
// caller's own, in a private temporary directory, for a supervisor that
// waits for its child's READY=1 (`gearshift start` and the daemon it
// detaches).
type Listener struct {
	conn *net.UnixConn
	dir  string
}

// Listen opens a Listener; Close removes it.
func Listen() (*Listener, error) {
	dir, err := os.MkdirTemp("", "gearshift-start-")
	if err != nil {
		return nil, fmt.Errorf("create the readiness socket: %w", err)
	}
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create the readiness socket: %w", err)
	}
	return &Listener{conn: conn, dir: dir}, nil
}

// Env is the environment entry that points a child's Notify at l.
func (l *Listener) Env() string { return "NOTIFY_SOCKET=" + l.conn.LocalAddr().String() }

// Ready returns a channel closed when READY=1 arrives before deadline;
// it stays open otherwise.
func (l *Listener) Ready(deadline time.Time) <-chan struct{} {
	got := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			l.conn.SetReadDeadline(deadline)
			n, err := l.conn.Read(buf)
			if err != nil {
				return
			}
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				if line == "READY=1" {
					close(got)
					return
				}
			}
		}
	}()
	return got
}

// Close closes the socket and removes its directory.
func (l *Listener) Close() error {
	err := l.conn.Close()
	os.RemoveAll(l.dir)
	return err
}

// Package sdnotify tells systemd about the daemon's state (Type=notify
// units) through the datagram socket named by $NOTIFY_SOCKET.
package sdnotify

import (
	"net"
	"os"
	"strings"
)

// Notify sends state ("READY=1", "STATUS=gear heavy", "STOPPING=1", …
// joined by newlines) to systemd. Without $NOTIFY_SOCKET it does nothing
// and returns false, nil.
func Notify(state ...string) (sent bool, err error) {
	path := os.Getenv("NOTIFY_SOCKET")
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

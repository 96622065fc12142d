package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
)

func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v, %v", sent, err)
	}

	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if sent, err := Notify("READY=1", "STATUS=gear light"); !sent || err != nil {
		t.Fatalf("Notify: %v, %v", sent, err)
	}
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1\nSTATUS=gear light" {
		t.Fatalf("received %q, %v", buf[:n], err)
	}
}

package sockdiag

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A listening socket nobody accepts on: each connection waits in its
// accept queue, as `ss -xl` shows in Recv-Q.
func TestUnixAcceptQueue(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "app.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	q, err := UnixAcceptQueue(sock, time.Second)
	if err != nil || q != (Queue{Waiting: 0, Backlog: 16}) {
		t.Fatalf("UnixAcceptQueue = %+v, %v; want none waiting of 16", q, err)
	}
	for i := range 5 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
	}
	if q, err := UnixAcceptQueue(sock, time.Second); err != nil || q.Waiting != 5 {
		t.Errorf("UnixAcceptQueue = %+v, %v; want 5 waiting", q, err)
	}
	// A relative path names the same file.
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(dir)
	if q, err := UnixAcceptQueue("app.sock", time.Second); err != nil || q.Waiting != 5 {
		t.Errorf("relative path: %+v, %v; want 5 waiting", q, err)
	}
}

func TestUnixAcceptQueueErrors(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	for _, tc := range []struct {
		path string
		want error
		msg  string
	}{
		{filepath.Join(dir, "none.sock"), os.ErrNotExist, "no such file"},
		{stale, ErrNotListening, "no process listens on it"},
		{plain, nil, "is not a socket"},
	} {
		_, err := UnixAcceptQueue(tc.path, time.Second)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("UnixAcceptQueue(%s): %v, want %q", filepath.Base(tc.path), err, tc.msg)
		}
	}
}

// nlmsg builds one netlink message of the dump.
func nlmsg(typ uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(payload)+4)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(unix.NLMSG_HDRLEN+len(payload)))
	ne.PutUint16(b[4:], typ)
	ne.PutUint32(b[8:], seq)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func attr(typ uint16, data []byte) []byte {
	b := make([]byte, 4, 4+len(data)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func pair(a, b uint32) []byte {
	d := make([]byte, 8)
	binary.NativeEndian.PutUint32(d[0:], a)
	binary.NativeEndian.PutUint32(d[4:], b)
	return d
}

func diagMsg(attrs ...[]byte) []byte {
	m := make([]byte, unixDiagMsgLen)
	m[0], m[2] = unix.AF_UNIX, tcpListen
	for _, a := range attrs {
		m = append(m, a...)
	}
	return m
}

func TestParseDump(t *testing.T) {
	www := diagMsg(attr(unixDiagName, []byte("/run/php/www.sock")), attr(unixDiagVFS, pair(42, 7)), attr(unixDiagRQLen, pair(3, 511)))
	abstract := diagMsg(attr(unixDiagName, []byte("\x00hidden")), attr(unixDiagRQLen, pair(0, 128)))
	errMsg := make([]byte, 4)
	e := -int32(syscall.EPERM)
	binary.NativeEndian.PutUint32(errMsg, uint32(e))
	tests := []struct {
		name    string
		in      []byte
		socks   []listener
		done    bool
		wantErr string
	}{
		{name: "two sockets, then done", in: append(append(nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, www), nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, abstract)...), nlmsg(unix.NLMSG_DONE, 1, make([]byte, 4))...),
			socks: []listener{{name: "/run/php/www.sock", vfsIno: 42, haveQ: true, waiting: 3, backlog: 511}, {name: "@hidden", haveQ: true, backlog: 128}}, done: true},
		{name: "more to come", in: nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, www), socks: []listener{{name: "/run/php/www.sock", vfsIno: 42, haveQ: true, waiting: 3, backlog: 511}}},
		{name: "an error", in: nlmsg(unix.NLMSG_ERROR, 1, errMsg), wantErr: "operation not permitted"},
		{name: "another request's answer", in: nlmsg(unix.SOCK_DIAG_BY_FAMILY, 9, www), wantErr: "an answer to request 9"},
		{name: "a message longer than the datagram", in: nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, www)[:30], wantErr: "a message of"},
		{name: "a short unix_diag_msg", in: nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, make([]byte, 8)), wantErr: "a unix_diag_msg of 8 bytes"},
		{name: "an attribute past its message", in: nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, append(diagMsg(), 200, 0, 0, 0)), wantErr: "an attribute of 200 bytes"},
		{name: "an attribute too short", in: nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, append(diagMsg(), 2, 0, 0, 0)), wantErr: "an attribute of 2 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socks, done, err := parseDump(tc.in, 1)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseDump: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || done != tc.done || len(socks) != len(tc.socks) {
				t.Fatalf("parseDump = %+v, %v, %v; want %+v, %v", socks, done, err, tc.socks, tc.done)
			}
			for i := range socks {
				if socks[i] != tc.socks[i] {
					t.Errorf("socket %d = %+v, want %+v", i, socks[i], tc.socks[i])
				}
			}
		})
	}
}

func TestFind(t *testing.T) {
	socks := []listener{
		{name: "/srv/other.sock", vfsIno: 42, haveQ: true, waiting: 9},
		{name: "/run/php/www.sock", vfsIno: 42, haveQ: true, waiting: 3},
		{name: "/run/php/noq.sock", vfsIno: 43},
	}
	if q, err := find(socks, "/run/php/www.sock", 42); err != nil || q.Waiting != 3 {
		t.Errorf("find by inode and name = %+v, %v; want 3 waiting", q, err)
	}
	if _, err := find(socks, "/run/php/x.sock", 44); !errors.Is(err, ErrNotListening) {
		t.Errorf("find of none: %v", err)
	}
	if _, err := find(socks, "/run/php/noq.sock", 43); err == nil {
		t.Error("find of a socket without a queue: no error")
	}
}

// FuzzParseDump: whatever the kernel's answer holds, the parser returns
// listeners or an error, and never panics.
func FuzzParseDump(f *testing.F) {
	www := diagMsg(attr(unixDiagName, []byte("/run/php/www.sock")), attr(unixDiagVFS, pair(42, 7)), attr(unixDiagRQLen, pair(3, 511)))
	f.Add(append(nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, www), nlmsg(unix.NLMSG_DONE, 1, make([]byte, 4))...))
	f.Add(nlmsg(unix.NLMSG_ERROR, 1, []byte{0xff, 0xff, 0xff, 0xff}))
	f.Add(nlmsg(unix.SOCK_DIAG_BY_FAMILY, 1, append(diagMsg(), 200, 0, 0, 0)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		socks, done, err := parseDump(in, 1)
		if err != nil && (socks != nil || done) {
			t.Fatal("an error with a result")
		}
	})
}

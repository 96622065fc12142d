// Package sockdiag reads what the kernel knows of a listening unix socket
// through NETLINK_SOCK_DIAG: its accept queue, the figure `ss -xl` shows
// as Recv-Q, which the program listening on it may not report.
package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Queue is the accept queue of a listening unix socket.
type Queue struct {
	Waiting uint32 // connections waiting to be accepted
	Backlog uint32 // the most the queue holds (listen(2)'s backlog)
}

// ErrNotListening is the error for a path that is a socket no one listens
// on (a stale socket file, left by a stopped server).
var ErrNotListening = errors.New("no process listens on it")

// Constants of linux/sock_diag.h and linux/unix_diag.h.
const (
	tcpListen      = 10 // TCP_LISTEN, the state of a listening unix socket too
	udiagShowName  = 0x01
	udiagShowVFS   = 0x02
	udiagShowRQLen = 0x10
	unixDiagName   = 0
	unixDiagVFS    = 1
	unixDiagRQLen  = 4
	unixDiagReqLen = 24 // struct unix_diag_req
	unixDiagMsgLen = 16 // struct unix_diag_msg
)

// UnixAcceptQueue returns the accept queue of the unix socket listening at
// path. The socket is found by the inode of the file at path, so a socket
// file left behind by a stopped server is not taken for a new one bound
// elsewhere. timeout bounds the kernel's answer.
func UnixAcceptQueue(path string, timeout time.Duration) (Queue, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Queue{}, err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return Queue{}, fmt.Errorf("%s is not a socket", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Queue{}, fmt.Errorf("%s: no inode", path)
	}
	socks, err := listeningUnix(timeout)
	if err != nil {
		return Queue{}, err
	}
	return find(socks, path, uint32(st.Ino))
}

// listener is one listening unix socket of the kernel's answer.
type listener struct {
	name    string // the address it is bound to ("" for none, "@…" abstract)
	vfsIno  uint32 // the inode of its file; 0 for an abstract socket
	haveQ   bool
	waiting uint32
	backlog uint32
}

// find picks the listener bound to the file with inode ino: by inode, and
// by name when inodes of several file systems collide.
func find(socks []listener, path string, ino uint32) (Queue, error) {
	var match *listener
	for i := range socks {
		s := &socks[i]
		if s.vfsIno != ino {
			continue
		}
		if match == nil || s.name == path {
			match = s
		}
	}
	switch {
	case match == nil:
		return Queue{}, fmt.Errorf("%s: %w", path, ErrNotListening)
	case !match.haveQ:
		return Queue{}, fmt.Errorf("%s: the kernel gave no queue length", path)
	}
	return Queue{Waiting: match.waiting, Backlog: match.backlog}, nil
}

// listeningUnix asks the kernel for every listening unix socket of the
// network namespace, with its name, file inode and queue.
func listeningUnix(timeout time.Duration) ([]listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("open sock_diag netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if timeout > 0 {
		tv := unix.NsecToTimeval(timeout.Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return nil, fmt.Errorf("sock_diag timeout: %w", err)
		}
	}
	const seq = 1
	if err := unix.Sendto(fd, dumpRequest(seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("ask sock_diag: %w", err)
	}
	var socks []listener
	buf := make([]byte, 64<<10)
	// A dump comes in datagrams of many messages, ending with NLMSG_DONE;
	// the bound keeps a kernel that never says done from holding the poll.
	for range 1 << 14 {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return nil, fmt.Errorf("sock_diag: no answer within %s", timeout)
			}
			return nil, fmt.Errorf("read sock_diag: %w", err)
		}
		more, done, err := parseDump(buf[:n], seq)
		if err != nil {
			return nil, err
		}
		socks = append(socks, more...)
		if done {
			return socks, nil
		}
	}
	return nil, errors.New("sock_diag: the dump did not end")
}

// dumpRequest is a SOCK_DIAG_BY_FAMILY dump request for the listening
// unix sockets, with their names, file inodes and queue lengths.
func dumpRequest(seq uint32) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+unixDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(b[8:], seq)
	r := b[unix.NLMSG_HDRLEN:]
	r[0] = unix.AF_UNIX
	ne.PutUint32(r[4:], 1<<tcpListen)
	ne.PutUint32(r[12:], udiagShowName|udiagShowVFS|udiagShowRQLen)
	ne.PutUint32(r[16:], ^uint32(0)) // cookie: none (INET_DIAG_NOCOOKIE)
	ne.PutUint32(r[20:], ^uint32(0))
	return b
}

// parseDump parses one datagram of the dump: the listeners in it, and
// whether it ended the dump.
func parseDump(b []byte, seq uint32) (socks []listener, done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(ne.Uint32(b[0:]))
		typ := ne.Uint16(b[4:])
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return nil, false, fmt.Errorf("sock_diag: a message of %d bytes in %d", l, len(b))
		}
		msg := b[unix.NLMSG_HDRLEN:l]
		if s := ne.Uint32(b[8:]); s != seq {
			return nil, false, fmt.Errorf("sock_diag: an answer to request %d, want %d", s, seq)
		}
		switch typ {
		case unix.NLMSG_DONE:
			return socks, true, nil
		case unix.NLMSG_ERROR:
			if len(msg) < 4 {
				return nil, false, errors.New("sock_diag: a short error message")
			}
			errno := -int32(ne.Uint32(msg))
			if errno == 0 {
				return socks, true, nil
			}
			return nil, false, fmt.Errorf("sock_diag: %w", unix.Errno(errno))
		case unix.SOCK_DIAG_BY_FAMILY:
			s, err := parseListener(msg)
			if err != nil {
				return nil, false, err
			}
			socks = append(socks, s)
		}
		b = b[min(len(b), nlmAlign(l)):]
	}
	return socks, false, nil
}

// parseListener parses one unix_diag_msg and its attributes.
func parseListener(msg []byte) (listener, error) {
	if len(msg) < unixDiagMsgLen {
		return listener{}, fmt.Errorf("sock_diag: a unix_diag_msg of %d bytes", len(msg))
	}
	ne := binary.NativeEndian
	var s listener
	attrs := msg[unixDiagMsgLen:]
	for len(attrs) >= 4 {
		l := int(ne.Uint16(attrs[0:]))
		typ := ne.Uint16(attrs[2:])
		if l < 4 || l > len(attrs) {
			return listener{}, fmt.Errorf("sock_diag: an attribute of %d bytes in %d", l, len(attrs))
		}
		data := attrs[4:l]
		switch typ {
		case unixDiagName:
			name := string(data)
			if len(name) > 0 && name[0] == 0 {
				name = "@" + name[1:]
			}
			s.name = name
		case unixDiagVFS:
			if len(data) >= 8 {
				s.vfsIno = ne.Uint32(data[0:])
			}
		case unixDiagRQLen:
			if len(data) >= 8 {
				s.haveQ, s.waiting, s.backlog = true, ne.Uint32(data[0:]), ne.Uint32(data[4:])
			}
		}
		attrs = attrs[min(len(attrs), nlaAlign(l)):]
	}
	return s, nil
}

func nlmAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
func nlaAlign(n int) int { return (n + 3) &^ 3 }

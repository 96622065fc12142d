package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"

	sysunix "golang.org/x/sys/unix"
)

// Access says who may change the daemon's course on the control socket:
// root, the daemon's own user, and members of control.admin_group. Anyone
// the socket's mode lets connect (root and control.group) may read the
// status. The kernel names the peer (SO_PEERCRED), not the client.
type Access struct {
	adminGroup string
	adminGID   int // -1: no admin group
}

// NewAccess returns the Access of control.admin_group (empty: root only).
func NewAccess(adminGroup string) (Access, error) {
	a := Access{adminGroup: adminGroup, adminGID: -1}
	if adminGroup == "" {
		return a, nil
	}
	g, err := user.LookupGroup(adminGroup)
	if err != nil {
		return a, fmt.Errorf("control.admin_group %q: %w", adminGroup, err)
	}
	a.adminGID, _ = strconv.Atoi(g.Gid)
	return a, nil
}

// Peer is the process at the other end of a control connection.
type Peer struct {
	PID, UID, GID int
}

type peerKey struct{}

// peerContext records the peer of c in ctx (http.Server.ConnContext).
func peerContext(ctx context.Context, c net.Conn) context.Context {
	if p, err := peerOf(c); err == nil {
		return context.WithValue(ctx, peerKey{}, p)
	}
	return ctx
}

func peerOf(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, fmt.Errorf("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *sysunix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = sysunix.GetsockoptUcred(int(fd), sysunix.SOL_SOCKET, sysunix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	return Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

// mayChange reports whether p may force, release or reload.
func (a Access) mayChange(p Peer) bool {
	if p.UID == 0 || p.UID == os.Geteuid() {
		return true
	}
	if a.adminGID < 0 {
		return false
	}
	if p.GID == a.adminGID {
		return true
	}
	u, err := user.LookupId(strconv.Itoa(p.UID))
	if err != nil {
		return false
	}
	gids, err := u.GroupIds()
	if err != nil {
		return false
	}
	for _, g := range gids {
		if g == strconv.Itoa(a.adminGID) {
			return true
		}
	}
	return false
}

// guard lets reads through and answers 403 to a change from a peer that
// may not make it, or whose credentials are unknown.
func (a Access) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		p, ok := r.Context().Value(peerKey{}).(Peer)
		if !ok || !a.mayChange(p) {
			who := "an unknown peer"
			if ok {
				who = fmt.Sprintf("uid %d", p.UID)
			}
			need := "root"
			if a.adminGroup != "" {
				need = "root or a member of control.admin_group " + a.adminGroup
			}
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s %s needs %s (the request came from %s); control.group may only read /v1/status", r.Method, r.URL.Path, need, who))
			return
		}
		next.ServeHTTP(w, r)
	})
}

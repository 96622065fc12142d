package varnish

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/varnishadm"
)

// Admin is one Varnish admin port, as a Target drives it. It owns its
// connection: it dials when a command needs one, and after a lost
// connection dials again by itself. A command on a connection the peer
// closed before answering (a restarted manager) is sent once more on a
// fresh one; a command that timed out is not. A Target asks for an Admin
// once and never re-dials: it only decides when to try again, with
// backoff. An error Varnish answered (a rejected command, a VCL that does
// not compile) is, or wraps, a *varnishadm.CLIError: the Target keeps the
// connection; any other error counts as a broken one.
type Admin interface {
	VCLInline(ctx context.Context, name, src, state string) error
	VCLUse(ctx context.Context, name string) error
	VCLLabel(ctx context.Context, label, vcl string) error
	VCLDiscard(ctx context.Context, name string) error
	VCLList(ctx context.Context) ([]VCL, error)
	// ChildState is the cache child's state as the manager reports it:
	// "running", or "stopped" when nothing is served.
	ChildState(ctx context.Context) (string, error)
	// Ban adds a ban of the expression words (field, operator, argument,
	// joined by &&).
	Ban(ctx context.Context, words ...string) error
	// Sessions counts the admin sessions opened so far: a new one means
	// the connection was lost and re-dialled (a manager restart, say).
	Sessions() int64
	Close() error
}

// VCL is one entry of `vcl.list`: a VCL program, or a label.
type VCL struct {
	Name   string
	Active bool
	Label  string // for a label: the VCL it points to; "" for a program
	Refs   int    // for a label: the VCLs that hand requests to it
}

// DialFunc returns the Admin of the admin port addr, authenticating with
// the secret in secretFile. A Target calls it once, until it succeeds; the
// Admin dials (and re-dials) itself.
type DialFunc func(addr, secretFile string) (Admin, error)

// DialAdmin is the DialFunc of the daemon: a varnishadm client whose
// commands without a deadline are bounded by timeout. It does no network
// I/O; the client dials on the first command, and re-dials by itself.
func DialAdmin(timeout time.Duration) DialFunc {
	return func(addr, secretFile string) (Admin, error) {
		a := &adminClient{addr: addr, secretFile: secretFile, timeout: timeout}
		c, err := a.newClient()
		if err != nil {
			return nil, err
		}
		a.c = c
		return a, nil
	}
}

var _ Admin = (*adminClient)(nil)

// adminClient adapts *varnishadm.Client to Admin: it reduces vcl.list to
// what a Target uses, and returns the client's errors as they are (those
// Varnish answered wrap a *varnishadm.CLIError).
// When varnishd refuses the secret it reads the secret file again, for the
// next command's dial: the file may have changed (a reinstalled varnish).
type adminClient struct {
	addr, secretFile string
	timeout          time.Duration

	mu   sync.Mutex
	c    *varnishadm.Client
	past int64 // sessions of the clients replaced after a refused secret
}

func (a *adminClient) newClient() (*varnishadm.Client, error) {
	c, err := varnishadm.NewFromFile(a.addr, a.secretFile)
	if err != nil {
		return nil, err
	}
	if a.timeout > 0 {
		c.Timeout = a.timeout
	}
	return c, nil
}

func (a *adminClient) client() *varnishadm.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.c
}

// done returns err, and after a refused secret swaps in a client with the
// secret file read again (the one that failed holds no connection).
func (a *adminClient) done(c *varnishadm.Client, err error) error {
	if errors.Is(err, varnishadm.ErrAuth) {
		if fresh, ferr := a.newClient(); ferr == nil {
			a.mu.Lock()
			if a.c == c {
				a.past += c.Sessions()
				a.c = fresh
				c.Close()
			}
			a.mu.Unlock()
		}
	}
	return err
}

func (a *adminClient) VCLInline(ctx context.Context, name, src, state string) error {
	c := a.client()
	return a.done(c, c.VCLInline(ctx, name, src, state))
}

func (a *adminClient) VCLUse(ctx context.Context, name string) error {
	c := a.client()
	return a.done(c, c.VCLUse(ctx, name))
}

func (a *adminClient) VCLLabel(ctx context.Context, label, vcl string) error {
	c := a.client()
	return a.done(c, c.VCLLabel(ctx, label, vcl))
}

func (a *adminClient) VCLDiscard(ctx context.Context, name string) error {
	c := a.client()
	return a.done(c, c.VCLDiscard(ctx, name))
}

func (a *adminClient) VCLList(ctx context.Context) ([]VCL, error) {
	c := a.client()
	list, err := c.VCLList(ctx)
	if err != nil {
		return nil, a.done(c, err)
	}
	vcls := make([]VCL, 0, len(list))
	for _, v := range list {
		if v.Status == "discarded" {
			continue // already on its way out, once its requests are done
		}
		vcl := VCL{Name: v.Name, Active: v.Active()}
		if v.IsLabel() {
			vcl.Label, vcl.Refs = v.LabelOf, v.LabelRefs
		}
		vcls = append(vcls, vcl)
	}
	return vcls, nil
}

// ChildState is "" (unknown) when the manager's answer names no state.
func (a *adminClient) ChildState(ctx context.Context) (string, error) {
	c := a.client()
	st, err := c.ChildState(ctx)
	if errors.Is(err, varnishadm.ErrChildState) {
		return "", nil
	}
	return st, a.done(c, err)
}

func (a *adminClient) Ban(ctx context.Context, words ...string) error {
	c := a.client()
	_, err := c.Run(ctx, append([]string{"ban"}, words...)...)
	return a.done(c, err)
}

// Sessions counts the sessions of every client this target has had.
func (a *adminClient) Sessions() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.past + a.c.Sessions()
}

func (a *adminClient) Close() error { return a.client().Close() }

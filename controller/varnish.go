package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/profiles"
)

// DialAdmin is the DialFunc of the daemon: a varnishadm client whose
// commands without a deadline are bounded by timeout. It does no network
// I/O; the client dials on the first command, and re-dials by itself.
func DialAdmin(timeout time.Duration) DialFunc {
	return func(addr, secretFile string) (Target, error) {
		a := &adminTarget{addr: addr, secretFile: secretFile, timeout: timeout}
		c, err := a.newClient()
		if err != nil {
			return nil, err
		}
		a.c = c
		return a, nil
	}
}

var _ Target = (*adminTarget)(nil)

// adminTarget adapts *varnishadm.Client to Target: it reduces vcl.list to
// what the loop uses, and returns the client's errors as they are (those
// Varnish answered wrap a *varnishadm.CLIError).
// When varnishd refuses the secret it reads the secret file again, for the
// next command's dial: the file may have changed (a reinstalled varnish).
type adminTarget struct {
	addr, secretFile string
	timeout          time.Duration

	mu   sync.Mutex
	c    *varnishadm.Client
	past int64 // sessions of the clients replaced after a refused secret
}

func (a *adminTarget) newClient() (*varnishadm.Client, error) {
	c, err := varnishadm.NewFromFile(a.addr, a.secretFile)
	if err != nil {
		return nil, err
	}
	if a.timeout > 0 {
		c.Timeout = a.timeout
	}
	return c, nil
}

func (a *adminTarget) client() *varnishadm.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.c
}

// done returns err, and after a refused secret swaps in a client with the
// secret file read again (the one that failed holds no connection).
func (a *adminTarget) done(c *varnishadm.Client, err error) error {
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

func (a *adminTarget) VCLInline(ctx context.Context, name, src, state string) error {
	c := a.client()
	return a.done(c, c.VCLInline(ctx, name, src, state))
}

func (a *adminTarget) VCLUse(ctx context.Context, name string) error {
	c := a.client()
	return a.done(c, c.VCLUse(ctx, name))
}

func (a *adminTarget) VCLLabel(ctx context.Context, label, vcl string) error {
	c := a.client()
	return a.done(c, c.VCLLabel(ctx, label, vcl))
}

func (a *adminTarget) VCLDiscard(ctx context.Context, name string) error {
	c := a.client()
	return a.done(c, c.VCLDiscard(ctx, name))
}

func (a *adminTarget) VCLList(ctx context.Context) ([]VCL, error) {
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
func (a *adminTarget) ChildState(ctx context.Context) (string, error) {
	c := a.client()
	st, err := c.ChildState(ctx)
	if errors.Is(err, varnishadm.ErrChildState) {
		return "", nil
	}
	return st, a.done(c, err)
}

// Sessions counts the sessions of every client this target has had.
func (a *adminTarget) Sessions() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.past + a.c.Sessions()
}

func (a *adminTarget) Close() error { return a.client().Close() }

// BuildProfiles is the BuildFunc of the daemon: the config's profiles.
func BuildProfiles(cfg *config.Config) (profiles.Set, error) { return profiles.Build(cfg.Site()) }

package controller

import (
	"context"
	"errors"
	"time"

	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/profiles"
)

// DialAdmin is the DialFunc of the daemon: a varnishadm client whose
// commands without a deadline are bounded by timeout.
func DialAdmin(timeout time.Duration) DialFunc {
	return func(addr, secretFile string) (Target, error) {
		c, err := varnishadm.NewFromFile(addr, secretFile)
		if err != nil {
			return nil, err
		}
		if timeout > 0 {
			c.Timeout = timeout
		}
		return adminTarget{c}, nil
	}
}

// adminTarget adapts *varnishadm.Client to Target: it marks errors Varnish
// answered as *CommandError and reduces vcl.list to what the loop uses.
type adminTarget struct{ c *varnishadm.Client }

func (a adminTarget) VCLInline(ctx context.Context, name, src, state string) error {
	return mark(a.c.VCLInline(ctx, name, src, state))
}

func (a adminTarget) VCLUse(ctx context.Context, name string) error {
	return mark(a.c.VCLUse(ctx, name))
}

func (a adminTarget) VCLLabel(ctx context.Context, label, vcl string) error {
	return mark(a.c.VCLLabel(ctx, label, vcl))
}

func (a adminTarget) VCLDiscard(ctx context.Context, name string) error {
	return mark(a.c.VCLDiscard(ctx, name))
}

func (a adminTarget) VCLList(ctx context.Context) ([]VCL, error) {
	list, err := a.c.VCLList(ctx)
	if err != nil {
		return nil, mark(err)
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

func (a adminTarget) Sessions() int64 { return a.c.Sessions() }

func (a adminTarget) Close() error { return a.c.Close() }

func mark(err error) error {
	var ce *varnishadm.CLIError
	if err != nil && errors.As(err, &ce) {
		return &CommandError{Err: err}
	}
	return err
}

// BuildProfiles is the BuildFunc of the daemon: profiles.Build.
func BuildProfiles(cfg *profiles.Config) (ProfileSet, error) {
	set, err := profiles.Build(cfg)
	if err != nil {
		return ProfileSet{}, err
	}
	var ps ProfileSet
	for i, p := range set {
		ps[i] = Profile{State: p.State, Name: p.Name, VCL: p.VCL}
	}
	return ps, nil
}

package varnish

import (
	"context"
	"fmt"
)

// Found is what Running found: the gear the target runs, and the
// connection it asked on, for Keep.
type Found struct {
	Gear string // the gear's name; "" when it runs none of gearshift's profiles
	// Sites are the gears of the site labels (a config with sites), by
	// site name.
	Sites map[string]string
	conn  Admin
}

// Running asks Varnish which gear's profile the target runs now: the
// active VCL in active mode, the label's VCL in label mode. It asks on a
// connection of its own, within the command timeout, and touches nothing
// of the target's, so that it may run beside anything and be abandoned:
// Keep hands its connection to the target, or closes it.
func (t *Target) Running(ctx context.Context) (Found, error) {
	t.mu.Lock()
	s := t.settings
	t.mu.Unlock()
	conn, err := t.dial(t.addr, t.secretFile)
	if err != nil {
		return Found{}, err
	}
	lctx, cancel := context.WithTimeout(ctx, s.Timeout)
	vcls, err := conn.VCLList(lctx)
	cancel()
	if err != nil {
		conn.Close()
		return Found{}, err
	}
	return Found{Gear: gearOf(s.Mode, vcls), Sites: siteGears(vcls), conn: conn}, nil
}

// Keep gives the target f's connection when it has none yet (its first
// Sync goes on with it), and closes it otherwise.
func (t *Target) Keep(f Found) {
	if f.conn == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn == nil {
		t.conn = f.conn
		return
	}
	f.conn.Close()
}

// Close closes f's connection, when Running's answer came too late to be
// kept.
func (f Found) Close() {
	if f.conn != nil {
		f.conn.Close()
	}
}

// Ban adds the ban words (field, operator, argument, joined by &&) to the
// target's Varnish on the target's own session, and tries once more when
// the connection broke under the first try. It may run beside a Sync: it
// waits behind the command in flight, a profile's compile included, so
// each try is bounded by the load timeout.
func (t *Target) Ban(ctx context.Context, words ...string) error {
	t.mu.Lock()
	conn, timeout := t.conn, t.settings.LoadTimeout
	t.mu.Unlock()
	if conn == nil {
		return fmt.Errorf("ban on %s: not connected yet", t.addr)
	}
	var err error
	for try := 0; try < 2; try++ {
		bctx, cancel := context.WithTimeout(ctx, timeout)
		err = conn.Ban(bctx, words...)
		cancel()
		if err == nil || IsCommandError(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

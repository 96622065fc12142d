// Package profilecheck compiles the profiles in every Varnish of a config
// under temporary names and discards them: `gearshift profiles check`.
package profilecheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/profiles"
)

// Result is the outcome of compiling one profile in one Varnish.
type Result struct {
	Target  string // the admin address
	Profile profiles.Profile
	Err     error // nil: it compiled, and was discarded again
	// Plain: the Varnish has no varnish-modules, and this is the
	// profile's Plain twin, which the daemon loads there.
	Plain bool
}

// Run compiles every profile of set in every target of cfg under a
// temporary name (gearshift-check-…, which a running daemon never
// touches) and discards it at once, so nothing changes in Varnish. each is
// called with every outcome as it comes; a profile that does not compile
// is a Result whose Err is a *varnishadm.CLIError with the compiler's
// message. The error is for what keeps the check from starting: no
// targets, or a target's secret file that cannot be read.
func Run(ctx context.Context, cfg *config.Config, set profiles.Set, each func(Result)) error {
	if len(cfg.Varnish.Targets) == 0 {
		return errors.New("varnish.targets: no Varnish to check the profiles against")
	}
	for _, t := range cfg.Varnish.Targets {
		c, err := varnishadm.NewFromFile(t.Admin, t.SecretFile)
		if err != nil {
			return fmt.Errorf("varnish target %s: %w", t.Admin, err)
		}
		if d := time.Duration(cfg.Varnish.Timeout); d > 0 {
			c.Timeout = d
			if c.LoadTimeout < d {
				c.LoadTimeout = d
			}
		}
		for _, p := range set {
			err := compile(ctx, c, p)
			if plain, ok := p.Plain(); ok && profiles.MissingModules(err) {
				// What the daemon loads into this Varnish instead.
				p, err = plain, compile(ctx, c, plain)
				each(Result{Target: t.Admin, Profile: p, Err: err, Plain: true})
				continue
			}
			each(Result{Target: t.Admin, Profile: p, Err: err})
		}
		c.Close()
	}
	return nil
}

// compile loads p under a temporary name and discards it.
func compile(ctx context.Context, c *varnishadm.Client, p profiles.Profile) error {
	raw := make([]byte, 4)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	// Cold: compiled and loaded, but no backend or probe is started.
	name := profiles.NamePrefix + "check-" + p.Gear.String() + "-" + hex.EncodeToString(raw)
	if err := c.VCLInline(ctx, name, p.VCL, "cold"); err != nil {
		return p.RedactError(err)
	}
	if err := c.VCLDiscard(ctx, name); err != nil {
		return fmt.Errorf("%s compiled, but discarding it failed (discard it with `varnishadm vcl.discard %s`): %w", name, name, err)
	}
	return nil
}

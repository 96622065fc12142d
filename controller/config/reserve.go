package config

import (
	"github.com/gearshift/gearshift/profiles"
)

// validateReserve refuses a backend.session_reserve that leaves anonymous
// visitors no connection of the max_connections the web server's config
// gives, when backend.max_connections is 0 (taken from there; a number
// written is compared by profiles.Backend.Check). The figure is this
// machine's: the problem is of kind Machine.
func (c *Config) validateReserve(v *validator) {
	r := c.Backend.SessionReserve
	if c.Backend.MaxConnections != 0 || r == profiles.ReserveAuto || r <= 0 {
		return
	}
	n, from := profiles.DetectMaxConnections()
	if from == "" {
		from = "gearshift's fallback, no web server config found"
	}
	if int(r) >= n {
		v.addKind(Machine, "backend.session_reserve", "%d is not below the effective backend.max_connections (%d, %s): anonymous visitors would have no connection left",
			r, n, from)
	}
}

// reserveUnenforced says what backend.session_reserve does without
// varnish-modules, for the warning of config check: "" when the reserve
// is off.
func (c *Config) reserveUnenforced() string {
	n := c.Backend.MaxConnections
	if n == 0 {
		n, _ = profiles.DetectMaxConnections()
	}
	r := c.Backend.ReserveFor(n, c.HasSites())
	if r == 0 || !c.HasSites() {
		return ""
	}
	return "; with sites, backend.session_reserve holds within each VCL alone (gearshift_copies' limit), not over every loaded VCL"
}

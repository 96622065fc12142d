package config

import (
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// DefaultSite is the site of every host no other site claims. It always
// exists; `sites:` may list it (without hosts) to give it settings.
const DefaultSite = "default"

// Site is one entry of `sites:`: a set of host names with its own gear.
type Site struct {
	Name  string   `yaml:"name"`  // [a-z0-9-]{1,32}, unique
	Hosts []string `yaml:"hosts"` // host names, or globs whose * is the whole leftmost label
	// Profiles are the site's own values of some profiles.* keys; the
	// rest are the server's.
	Profiles SiteProfiles `yaml:"profiles"`
	// MaxConnections bounds the backend connections the site's requests
	// hold at once; 0: half of the effective backend.max_connections.
	MaxConnections int    `yaml:"max_connections"`
	PHPFPMPool     string `yaml:"phpfpm_pool"`      // the sensor.phpfpm pool that serves the site alone
	PurgeTokenFile string `yaml:"purge_token_file"` // replaces profiles.purge_token_file for the site
}

// SiteProfiles are the profiles.* keys a site may set for itself; a nil
// field is the server's value.
type SiteProfiles struct {
	NeverCache      *[]string         `yaml:"never_cache"`
	SessionCookies  *[]string         `yaml:"session_cookies"`
	IgnoreCookies   *[]string         `yaml:"ignore_cookies"`
	StripSetCookies *[]string         `yaml:"strip_set_cookies"`
	GuestPages      *string           `yaml:"guest_pages"`
	DropQueryParams *[]string         `yaml:"drop_query_params"`
	HeavyMinTTL     *timefmt.Duration `yaml:"heavy_min_ttl"`
	PurgeACL        *[]string         `yaml:"purge_acl"`
}

// Apply returns the server's options o with the site's own values.
func (sp SiteProfiles) Apply(o profiles.Options) profiles.Options {
	set := func(dst *[]string, src *[]string) {
		if src != nil {
			*dst = append([]string(nil), (*src)...)
		}
	}
	set(&o.NeverCache, sp.NeverCache)
	set(&o.SessionCookies, sp.SessionCookies)
	set(&o.IgnoreCookies, sp.IgnoreCookies)
	set(&o.StripSetCookies, sp.StripSetCookies)
	set(&o.DropQueryParams, sp.DropQueryParams)
	set(&o.PurgeACL, sp.PurgeACL)
	if sp.GuestPages != nil {
		o.GuestPages = *sp.GuestPages
	}
	if sp.HeavyMinTTL != nil {
		o.HeavyMinTTL = *sp.HeavyMinTTL
	}
	return o
}

// HasSites tells whether the config has a `sites` key: without one,
// gearshift is 0.4 exactly (no router; the gear's profile is active).
func (c *Config) HasSites() bool { return len(c.Sites) > 0 }

// SiteList returns the sites in force, DefaultSite first (listed or not),
// then the others in the config's order, each max_connections resolved
// against effective, the effective backend.max_connections (0 when
// unknown: the site's own value, or none). Without a `sites` key it is
// DefaultSite alone.
func (c *Config) SiteList(effective int) []Site {
	def := Site{Name: DefaultSite}
	var rest []Site
	for _, s := range c.Sites {
		if s.Name == DefaultSite {
			def = s
			continue
		}
		rest = append(rest, s)
	}
	list := append([]Site{def}, rest...)
	if !c.HasSites() {
		return list
	}
	for i := range list {
		if list[i].MaxConnections == 0 && effective > 0 {
			list[i].MaxConnections = max(1, effective/2)
		}
	}
	return list
}

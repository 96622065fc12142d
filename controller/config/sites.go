package config

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// DefaultSite is the site of every host no other site claims. It always
// exists; `sites:` may list it (without hosts) to give it settings.
const DefaultSite = "default"

// Site is one entry of `sites:`: a set of host names with its own gear.
type Site struct {
	// Name is the site's: 1 to 32 of a-z, 0-9 and -, unique; default is
	// the site of every host no other site claims.
	Name string `yaml:"name"`
	// Hosts are the site's host names, or globs whose * is the whole
	// leftmost label (*.example.com), matched lower-cased against the
	// Host without its port; none for default.
	Hosts []string `yaml:"hosts"`
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
	NeverCache      *[]string         `yaml:"never_cache"`       // the site's own profiles.never_cache; unset: the server's
	SessionCookies  *[]string         `yaml:"session_cookies"`   // the site's own profiles.session_cookies; unset: the server's
	IgnoreCookies   *[]string         `yaml:"ignore_cookies"`    // the site's own profiles.ignore_cookies; unset: the server's
	StripSetCookies *[]string         `yaml:"strip_set_cookies"` // the site's own profiles.strip_set_cookies; unset: the server's
	GuestPages      *string           `yaml:"guest_pages"`       // the site's own profiles.guest_pages; unset: the server's
	DropQueryParams *[]string         `yaml:"drop_query_params"` // the site's own profiles.drop_query_params; unset: the server's
	HeavyMinTTL     *timefmt.Duration `yaml:"heavy_min_ttl"`     // the site's own profiles.heavy_min_ttl; unset: the server's
	PurgeACL        *[]string         `yaml:"purge_acl"`         // the site's own profiles.purge_acl; unset: the server's
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

// Bounds of `sites:`: every site is a VCL label and every host a test in
// the router, and a hostile file must not make the daemon render or
// compile for ever. A managed host runs tens or hundreds of sites.
const (
	MaxSites     = 1000
	MaxSiteHosts = 10_000 // host names and globs of all sites together
)

var (
	siteNameRE = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	// hostLabelRE is one label of a host name (RFC 1123), lower-cased.
	hostLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// SiteOptions returns the profiles.Options site s renders its gear
// profiles from: the server's with the site's own values.
func (c *Config) SiteOptions(s Site) profiles.Options { return s.Profiles.Apply(c.Profiles) }

// Guests tells whether heavy asks the daemon for guest pages, for the
// server or for any site (a site's own guest_pages): the daemon listens at
// profiles.guest_listen then.
func (c *Config) Guests() bool {
	if c.Profiles.Guests() {
		return true
	}
	for _, s := range c.Sites {
		if o := c.SiteOptions(s); o.Guests() {
			return true
		}
	}
	return false
}

// OverrideSet is one distinct set of the sites' profiles overrides: the
// options one compiled profile per gear is rendered from, and the sites
// that run on those profiles.
type OverrideSet struct {
	Options profiles.Options
	Sites   []string // names, in SiteList's order
}

// OverrideSets returns the distinct sets of the sites' applied options,
// in SiteList's order (the default site's set first): sites whose
// profiles blocks come to the same options share a set, whatever they
// wrote. Without a `sites` key it is one set, the server's options.
func (c *Config) OverrideSets() []OverrideSet {
	var sets []OverrideSet
	index := map[string]int{}
	for _, s := range c.SiteList(0) {
		o := c.SiteOptions(s)
		k := OptionsKey(o)
		i, ok := index[k]
		if !ok {
			i = len(sets)
			index[k] = i
			sets = append(sets, OverrideSet{Options: o})
		}
		sets[i].Sites = append(sets[i].Sites, s.Name)
	}
	return sets
}

// OptionsKey is o as one string, equal for equal options: an absent list
// and an empty one render the same profile, and read the same here.
func OptionsKey(o profiles.Options) string {
	b, err := yaml.Marshal(o)
	if err != nil {
		return fmt.Sprintf("%#v", o) // no Options field fails to marshal
	}
	return string(b)
}

// DefaultMaxVCL is varnishd's max_vcl default: past that many loaded VCLs
// (labels not counted) Varnish warns at every vcl.load, or refuses it
// with max_vcl_handling 2.
const DefaultMaxVCL = 100

// LoadedVCLs returns how many VCLs gearshift keeps loaded in each Varnish
// with c: three gear profiles per override set, and with sites in active
// mode the router. A reload loads the new before it discards the old, so
// for a moment a Varnish holds both: reload is that peak when the running
// config has as many.
func (c *Config) LoadedVCLs() (steady, reload int) { return c.loadedVCLs(len(c.OverrideSets())) }

func (c *Config) loadedVCLs(sets int) (steady, reload int) {
	steady = len(state.All) * sets
	if c.HasSites() && c.Varnish.Mode == ModeActive {
		steady++
	}
	return steady, 2 * steady
}

// maxVCLWarning is the warning of a config whose VCLs could pass
// Varnish's default max_vcl during a reload, with Varnish's own (boot)
// VCL beside them; nil when they cannot.
func (c *Config) maxVCLWarning() *Problem {
	sets := len(c.OverrideSets())
	steady, reload := c.loadedVCLs(sets)
	if reload+1 <= DefaultMaxVCL {
		return nil
	}
	return &Problem{
		Path: "sites",
		Msg: fmt.Sprintf("%d distinct sets of site profiles overrides load %d VCLs, and a reload briefly %d beside Varnish's own: "+
			"more than varnishd's default max_vcl (%d), past which it warns at every load, or refuses it with max_vcl_handling=2; "+
			"give sites with the same needs the same overrides, or raise it (varnishd -p max_vcl=%d or more)",
			sets, steady, reload, DefaultMaxVCL, reload+1),
	}
}

// SiteOf returns the name of the site that serves a request for host: the
// site with that exact host name, else the one whose glob matches with
// the most labels, else DefaultSite. The host is matched lower-cased and
// without its port.
func (c *Config) SiteOf(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	best, bestLen := DefaultSite, 0
	for _, s := range c.Sites {
		for _, p := range s.Hosts {
			p = strings.ToLower(p)
			if p == host {
				return s.Name
			}
			if suffix, ok := strings.CutPrefix(p, "*"); ok && len(suffix) > bestLen &&
				strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				best, bestLen = s.Name, len(suffix)
			}
		}
	}
	return best
}

// validateSites checks `sites:`, every problem by its key
// ("sites[2].hosts[0]").
func (c *Config) validateSites(v *validator) {
	if n := len(c.Sites); n > MaxSites {
		v.add("sites", "%d sites, more than the %d one gearshift routes", n, MaxSites)
		return
	}
	hosts := 0
	for _, s := range c.Sites {
		hosts += len(s.Hosts)
	}
	if hosts > MaxSiteHosts {
		v.add("sites", "%d host names and globs, more than the %d one gearshift routes: a glob (*.example.com) stands for many", hosts, MaxSiteHosts)
		return
	}
	names := map[string]int{}
	type where struct{ site, host int }
	claimed := map[string]where{}
	pools := map[string]int{}
	checked := map[string][]Problem{}
	server := map[string]bool{}
	c.Profiles.Check(func(key, format string, args ...any) { server[key+"\x00"+fmt.Sprintf(format, args...)] = true })
	for i, s := range c.Sites {
		p := fmt.Sprintf("sites[%d]", i)
		switch j, dup := names[s.Name]; {
		case s.Name == "":
			v.add(p+".name", "must name the site: 1 to 32 of a-z, 0-9 and -")
		case !siteNameRE.MatchString(s.Name):
			v.add(p+".name", "%q is not a site name: 1 to 32 of a-z, 0-9 and -", s.Name)
		case dup:
			v.add(p+".name", "site %s is already sites[%d]: a name is one site's", s.Name, j)
		default:
			names[s.Name] = i
		}
		switch {
		case s.Name == DefaultSite && len(s.Hosts) > 0:
			v.add(p+".hosts", "the default site serves every host no other site claims: drop its hosts, or give them a site of their own")
		case s.Name != DefaultSite && len(s.Hosts) == 0:
			v.add(p+".hosts", "site %s needs its host names (www.example.com) or globs (*.example.com)", s.Name)
		}
		for k, h := range s.Hosts {
			key := fmt.Sprintf("%s.hosts[%d]", p, k)
			if err := checkHostPattern(h); err != nil {
				v.add(key, "%v", err)
				continue
			}
			lower := strings.ToLower(h)
			w, dup := claimed[lower]
			switch {
			case !dup:
				claimed[lower] = where{i, k}
			case w.site == i:
				v.add(key, "%s is already sites[%d].hosts[%d]: give it once", h, i, w.host)
			default:
				v.add(key, "%s is already a host of site %s (sites[%d].hosts[%d]), not of %s too: a host belongs to one site",
					h, c.Sites[w.site].Name, w.site, w.host, s.Name)
			}
		}
		if s.MaxConnections < 0 {
			v.add(p+".max_connections", "must be 0 (half of the effective backend.max_connections) or a number of connections, got %d", s.MaxConnections)
		} else if b := c.Backend.MaxConnections; b > 0 && s.MaxConnections > b {
			v.add(p+".max_connections", "%d is more than backend.max_connections (%d): a site holds at most the backend's connections", s.MaxConnections, b)
		}
		if pool := s.PHPFPMPool; pool != "" {
			if err := c.checkSitePool(pool); err != nil {
				v.add(p+".phpfpm_pool", "%v", err)
			} else if j, dup := pools[pool]; dup {
				v.add(p+".phpfpm_pool", "pool %s is already site %s's (sites[%d].phpfpm_pool): a pool's signals move one site", pool, c.Sites[j].Name, j)
			} else {
				pools[pool] = i
			}
		}
		c.checkSiteProfiles(v, i, s.Profiles, server, checked)
	}
}

// checkHostPattern says what is wrong with an entry of sites[].hosts: a
// host name, or a glob whose * is the whole leftmost label; nil if
// nothing.
func checkHostPattern(h string) error {
	const what = "letters, digits and - between dots (an international name in its xn-- form)"
	switch {
	case h == "":
		return errors.New("an empty host: give a host name such as www.example.com")
	case strings.Contains(h, "://"):
		return fmt.Errorf("%q has a scheme: give the host name alone (example.com, not https://example.com/)", h)
	case strings.ContainsAny(h, "/?#"):
		return fmt.Errorf("%q has a path: give the host name alone (example.com, not example.com/shop)", h)
	case strings.HasPrefix(h, "["):
		return fmt.Errorf("%q is not a host name: %s", h, what)
	case strings.Contains(h, ":"):
		return fmt.Errorf("%q has a port: give the host name alone, it is matched without the port", h)
	}
	name := strings.ToLower(h)
	if strings.Contains(name, "*") {
		rest, ok := strings.CutPrefix(name, "*.")
		if !ok || strings.Contains(rest, "*") {
			return fmt.Errorf("%q: a glob's * must be the whole leftmost label, as in *.example.com", h)
		}
		name = rest
	}
	switch {
	case strings.HasSuffix(name, "."):
		return fmt.Errorf("%q ends in a dot: write it without", h)
	case len(name) > 253:
		return fmt.Errorf("%.40q… is longer than a host name's 253 characters", h)
	}
	for _, label := range strings.Split(name, ".") {
		if !hostLabelRE.MatchString(label) {
			return fmt.Errorf("%q is not a host name: %s", h, what)
		}
	}
	return nil
}

// sitePools maps each phpfpm_pool a site names to the site; nil without.
// A pool two sites name (refused) is the first's.
func (c *Config) sitePools() map[string]string {
	var pools map[string]string
	for _, s := range c.Sites {
		if s.PHPFPMPool == "" {
			continue
		}
		if pools == nil {
			pools = map[string]string{}
		}
		if _, dup := pools[s.PHPFPMPool]; !dup {
			pools[s.PHPFPMPool] = s.Name
		}
	}
	return pools
}

// checkSitePool says why a site's phpfpm_pool is not a pool sensor.phpfpm
// reads, or nil: the pools of sensor.phpfpm.pools, by name. The pool of
// sensor.phpfpm.url or socket has no name of its own, and is the
// server's.
func (c *Config) checkSitePool(pool string) error {
	var read []string
	for _, p := range c.Sensor.PHPFPM.Pools {
		if p.Name == pool {
			return nil
		}
		if p.Name != "" {
			read = append(read, p.Name)
		}
	}
	if len(read) == 0 {
		return fmt.Errorf("sensor.phpfpm reads no pool named %s: add it to sensor.phpfpm.pools with its name", pool)
	}
	return fmt.Errorf("sensor.phpfpm reads no pool named %s (it reads %s): add it to sensor.phpfpm.pools with its name", pool, strings.Join(read, ", "))
}

// checkSiteProfiles checks site i's profiles block as the server's
// profiles.* keys are checked (profiles.Options.Check), on the options the
// site applies: a problem of a key the site sets is the site's
// (sites[i].profiles.never_cache[0]); one of the server's keys that only
// the site's values bring about (a guest_listen the site's guest_pages
// needs) is named under sites[i].profiles; the server's own problems are
// the server's. server holds the server's problems, checked the problems
// of the blocks seen before, by their values.
func (c *Config) checkSiteProfiles(v *validator, i int, sp SiteProfiles, server map[string]bool, checked map[string][]Problem) {
	own := sp.keys()
	if len(own) == 0 {
		return
	}
	k := OptionsKey(sp.Apply(profiles.Options{})) + fmt.Sprint(own)
	problems, ok := checked[k]
	if !ok {
		o := c.SiteOptions(Site{Profiles: sp})
		o.Check(func(key, format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			field, _, _ := strings.Cut(strings.TrimPrefix(key, "profiles."), "[")
			field, _, _ = strings.Cut(field, ".")
			switch {
			case own[field]:
				problems = append(problems, Problem{Path: strings.TrimPrefix(key, "profiles"), Msg: msg})
			case !server[key+"\x00"+msg]:
				problems = append(problems, Problem{Msg: fmt.Sprintf("with this site's values, %s: %s", key, msg)})
			}
		})
		checked[k] = problems
	}
	prefix := fmt.Sprintf("sites[%d].profiles", i)
	for _, p := range problems {
		v.add(prefix+p.Path, "%s", p.Msg)
	}
}

// keys returns the yaml keys of the fields sp sets.
func (sp SiteProfiles) keys() map[string]bool {
	keys := map[string]bool{}
	v := reflect.ValueOf(sp)
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			keys[name] = true
		}
	}
	return keys
}

// validateSiteFiles checks the files the sites name: each purge_token_file
// as profiles.purge_token_file is checked.
func (c *Config) validateSiteFiles(v *validator) {
	for i, s := range c.Sites {
		if f := s.PurgeTokenFile; f != "" {
			if _, err := profiles.ReadPurgeToken(f); err != nil {
				v.addKind(Machine, fmt.Sprintf("sites[%d].purge_token_file", i), "%v", err)
			}
		}
	}
}

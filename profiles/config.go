// Package profiles holds what each gear means: gearshift's configuration,
// the state thresholds, and the VCL program rendered for each profile.
package profiles

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/state"
)

// DefaultPath is where gearshift looks for its config when --config is not given.
const DefaultPath = "/etc/gearshift/gearshift.yaml"

// Duration is a time.Duration written in YAML as a Go duration string ("90s", "2m").
type Duration time.Duration

// Config is gearshift's whole configuration (SPEC section 6).
type Config struct {
	PollInterval  Duration   `yaml:"poll_interval"` // default 1s
	FastWindow    Duration   `yaml:"fast_window"`   // default 10s; 0 = Load1 alone
	CPUs          int        `yaml:"cpus"`          // default 0 = detect
	Varnish       Varnish    `yaml:"varnish"`
	Backend       Backend    `yaml:"backend"`
	States        States     `yaml:"states"`
	Hysteresis    Hysteresis `yaml:"hysteresis"`
	Sensor        Sensor     `yaml:"sensor"`
	Profiles      Profiles   `yaml:"profiles"`
	OnExit        string     `yaml:"on_exit"` // default keep; or light, moderate, heavy
	Hooks         Hooks      `yaml:"hooks"`
	Control       Control    `yaml:"control"`
	Log           Log        `yaml:"log"`
	PIDFile       string     `yaml:"pid_file"`       // default /run/gearshift/gearshift.pid
	MetricsListen string     `yaml:"metrics_listen"` // default "" (off)
}

// Varnish lists the Varnish instances gearshift drives, and how.
type Varnish struct {
	// Mode is how a gear is applied: ModeActive (default) makes the gear's
	// profile the active VCL; ModeLabel points the label Label at it and
	// leaves the active VCL (the site's own) alone.
	Mode    string   `yaml:"mode"`
	Timeout Duration `yaml:"timeout"` // per admin command, default 2s (loading a VCL gets longer)
	Targets []Target `yaml:"targets"` // default one: 127.0.0.1:6082 with /etc/varnish/secret
}

// Target is one Varnish admin port (varnishd -T) and its secret file (-S).
type Target struct {
	Admin      string `yaml:"admin"`
	SecretFile string `yaml:"secret_file"`
	// Name is varnishd's -n (an instance name or its working directory) of
	// a Varnish on this machine: its traffic is read with varnishstat
	// (client_rps, backend_rps, …). Default "" = no traffic signals.
	Name string `yaml:"name"`
}

// Backend is the origin server (Apache) the rendered profiles point at.
type Backend struct {
	Host string `yaml:"host"` // default 127.0.0.1
	Port int    `yaml:"port"` // default 8080
}

// Hysteresis tunes how eagerly the machine moves between states.
type Hysteresis struct {
	UpConfirm  int      `yaml:"up_confirm"`  // default 3 samples
	DownWindow Duration `yaml:"down_window"` // default 120s
	MinDwell   Duration `yaml:"min_dwell"`   // default 60s
	// DownTrafficRatio: no step down while client_rps is above this
	// fraction of the rate the gear was entered at. Default 0.6; 0 = off.
	DownTrafficRatio float64 `yaml:"down_traffic_ratio"`
}

// Sensor configures the optional sources of signals beside the machine's
// vitals. Each is off when empty.
type Sensor struct {
	// Cgroup is a cgroup v2 (a path under /sys/fs/cgroup, or absolute)
	// whose pressure and memory replace the machine's psi_cpu, psi_mem and
	// mem_available_pct. Default "" = the machine's.
	Cgroup string `yaml:"cgroup"`
	// ApacheStatus is the URL of Apache's mod_status page (server-status?auto):
	// apache_busy_ratio. Default "" = off.
	ApacheStatus string `yaml:"apache_status"`
	Probe        Probe  `yaml:"probe"`
	// InjectFile holds a number that something else writes: injected.
	// Default "" = off; a missing file is no value.
	InjectFile string `yaml:"inject_file"`
}

// Probe times a backend URL's first byte every poll: backend_ttfb_ms.
type Probe struct {
	URL     string   `yaml:"url"`     // default "" = off
	Timeout Duration `yaml:"timeout"` // default 1s; a probe that takes longer counts as this
}

// Profiles holds the values rendered into the three VCL programs.
type Profiles struct {
	StaticTTL       Duration `yaml:"static_ttl"`        // default 1h
	HeavyMinTTL     Duration `yaml:"heavy_min_ttl"`     // default 2m
	HeavySessionTTL Duration `yaml:"heavy_session_ttl"` // default 30s
	HeavyGrace      Duration `yaml:"heavy_grace"`       // default 10m
	NormalizeHost   bool     `yaml:"normalize_host"`    // default true
	ExposeHeaders   bool     `yaml:"expose_headers"`    // default true
	// SessionCookies names the cookies that make a session request;
	// empty (the default): every cookie not in IgnoreCookies does.
	SessionCookies []string `yaml:"session_cookies"` // names or globs
	// IgnoreCookies are harmless cookies (analytics, consent, A/B tests):
	// never a session, removed from requests before the cache.
	IgnoreCookies []string `yaml:"ignore_cookies"` // names or globs
	// StripSetCookies are cookies heavy may strip from an anonymous
	// response, to share it; default none.
	StripSetCookies  []string `yaml:"strip_set_cookies"` // names or globs
	StaticExtensions []string `yaml:"static_extensions"`
	NeverCache       []string `yaml:"never_cache"`  // path regexes
	PurgeACL         []string `yaml:"purge_acl"`    // addresses or CIDRs
	PassHeaders      []string `yaml:"pass_headers"` // request headers that make a request uncacheable
	// ModerateHeuristicTTL is moderate's TTL for anonymous responses with no
	// freshness information; default 30s, 0 = none.
	ModerateHeuristicTTL Duration `yaml:"moderate_heuristic_ttl"`
	Light                Source   `yaml:"light"`
	Moderate             Source   `yaml:"moderate"`
	Heavy                Source   `yaml:"heavy"`
}

// Sources returns each gear's source, by state. A gear added to state.All
// fails to compile here until it has its field in Profiles.
func (p *Profiles) Sources() [len(state.All)]*Source {
	return [...]*Source{state.Light: &p.Light, state.Moderate: &p.Moderate, state.Heavy: &p.Heavy}
}

// Source optionally replaces a gear's built-in VCL with a user's file, used verbatim.
type Source struct {
	VCLFile string `yaml:"vcl_file"` // default "" = built-in template
}

// Values of varnish.mode.
const (
	ModeActive = "active"
	ModeLabel  = "label"
)

// Label is the VCL label gearshift keeps pointed at the current gear's
// profile in label mode; the site's VCL hands requests to it with
// return (vcl(gearshift)).
const Label = "gearshift"

// Modes are the accepted values of varnish.mode.
var Modes = []string{ModeActive, ModeLabel}

// Hooks are commands the daemon runs on events.
type Hooks struct {
	// OnChange is run after every gear change: the command and its
	// arguments, without a shell, with GEARSHIFT_FROM, GEARSHIFT_TO,
	// GEARSHIFT_REASON and GEARSHIFT_MODE in its environment. Default none.
	OnChange []string `yaml:"on_change"`
	Timeout  Duration `yaml:"timeout"` // default 30s; then the hook's process group is killed
}

// Control is the daemon's control socket.
type Control struct {
	Socket string `yaml:"socket"` // default /run/gearshift/gearshift.sock
	Group  string `yaml:"group"`  // default "" = root's group; may read the status
	// AdminGroup may also force, auto and reload; default "" = root only.
	AdminGroup string `yaml:"admin_group"`
}

// Log is where and how much the daemon logs.
type Log struct {
	File  string `yaml:"file"`  // default /var/log/gearshift/gearshift.log
	Level string `yaml:"level"` // default info
}

// Default returns the embedded defaults, matching a stock Debian/Ubuntu Varnish.
func Default() *Config {
	return &Config{
		PollInterval: Duration(time.Second),
		FastWindow:   Duration(10 * time.Second),
		Varnish: Varnish{
			Mode:    ModeActive,
			Timeout: Duration(2 * time.Second),
			Targets: []Target{{Admin: "127.0.0.1:6082", SecretFile: "/etc/varnish/secret"}},
		},
		Backend: Backend{Host: "127.0.0.1", Port: 8080},
		States: States{
			Moderate: Band{
				Enter: Rule{"load_per_cpu": 0.70, "mem_available_pct": 20},
				Stay:  Rule{"load_per_cpu": 0.50, "mem_available_pct": 25},
			},
			Heavy: Band{
				Enter: Rule{"load_per_cpu": 1.50, "mem_available_pct": 10},
				Stay:  Rule{"load_per_cpu": 1.00, "mem_available_pct": 15},
			},
		},
		Hysteresis: Hysteresis{
			UpConfirm:  3,
			DownWindow: Duration(120 * time.Second),
			MinDwell:   Duration(60 * time.Second),

			DownTrafficRatio: 0.6,
		},
		Sensor: Sensor{Probe: Probe{Timeout: Duration(time.Second)}},
		Profiles: Profiles{
			StaticTTL:            Duration(time.Hour),
			HeavyMinTTL:          Duration(2 * time.Minute),
			HeavySessionTTL:      Duration(30 * time.Second),
			HeavyGrace:           Duration(10 * time.Minute),
			NormalizeHost:        true,
			ExposeHeaders:        true,
			IgnoreCookies:        DefaultIgnoreCookies(),
			StaticExtensions:     []string{"png", "gif", "jpg", "jpeg", "ico", "svg", "webp", "css", "js", "woff", "woff2", "ttf", "swf", "mp4", "pdf"},
			NeverCache:           []string{`^/wp-admin`, `^/wp-login\.php`, `^/administrator`, `^/user/login`, `^/admin`, `^/cart`, `^/checkout`, `^/my-account`},
			PurgeACL:             []string{"127.0.0.1", "::1"},
			PassHeaders:          []string{"Authorization", "X-WP-Nonce", "X-CSRF-Token"},
			ModerateHeuristicTTL: Duration(30 * time.Second),
		},
		OnExit:  "keep",
		Hooks:   Hooks{Timeout: Duration(30 * time.Second)},
		Control: Control{Socket: "/run/gearshift/gearshift.sock"},
		Log:     Log{File: "/var/log/gearshift/gearshift.log", Level: "info"},
		PIDFile: "/run/gearshift/gearshift.pid",
	}
}

// UnmarshalYAML reads a Go duration string such as "90s" or "2m".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration such as 90s or 2m", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (use e.g. 90s, 2m, 1h)", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String returns the duration as a short Go duration string: "2m" rather
// than "2m0s", "1h30m" rather than "1h30m0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// YAML returns the config as YAML, every setting included: what
// `gearshift config show` prints.
func (c *Config) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// DefaultIgnoreCookies are the cookies known to identify nobody: set by
// analytics, advertising, consent and A/B-testing scripts for their own
// use, and the non-identifying cookies of the CMSs gearshift knows. A
// cookie is added here only when no server-side code decides a page by
// it for one user.
func DefaultIgnoreCookies() []string {
	return []string{
		// Google Analytics, Tag Manager and Ads.
		"_ga", "_ga_*", "_gid", "_gat*", "_gcl_*", "__utm*", "_dc_gtm_*",
		// Meta, Microsoft (Clarity, Bing), Hotjar, Matomo, HubSpot, TikTok,
		// Pinterest, LinkedIn.
		"_fbp", "_fbc", "_clck", "_clsk", "_uetsid", "_uetvid", "_hj*",
		"_pk_*", "__hstc", "__hssc", "__hssrc", "hubspotutk", "_ttp",
		"_pin_unauth", "li_gc", "_tt_enable_cookie",
		// Consent managers: Cookiebot, OneTrust, CookieYes, Complianz,
		// GDPR Cookie Consent, IAB TCF.
		"CookieConsent", "OptanonConsent", "OptanonAlertBoxClosed",
		"cookieyes-consent", "cmplz_*", "cookielawinfo-*",
		"viewed_cookie_policy", "euconsent-v2",
		// WordPress: the login page's cookie check and the chosen
		// language of the login form.
		"wordpress_test_cookie", "wp_lang",
		// Drupal 7's JavaScript check.
		"has_js",
	}
}

// Package config is gearshift's configuration: the YAML file, its defaults,
// and the validation that refuses a bad one with every problem named by its
// key. The parts it configures own their blocks: the sources theirs
// (sensor.Config), the profiles theirs (profiles.Options).
package config

import (
	"bytes"
	"maps"
	"net"
	"net/netip"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// DefaultPath is where gearshift looks for its config when --config is not given.
const DefaultPath = "/etc/gearshift/gearshift.yaml"

// Config is gearshift's whole configuration (docs/operating.md#config).
type Config struct {
	PollInterval  timefmt.Duration `yaml:"poll_interval"` // how often the vitals are read and the gear decided
	FastWindow    timefmt.Duration `yaml:"fast_window"`   // window of the run-queue average beside Load1; 0: Load1 alone
	CPUs          int              `yaml:"cpus"`          // CPUs the load is divided by; 0: detected (cgroup quota, else logical CPUs)
	Varnish       Varnish          `yaml:"varnish"`
	Backend       profiles.Backend `yaml:"backend"`
	States        States           `yaml:"states"`
	Hysteresis    Hysteresis       `yaml:"hysteresis"`
	Sensor        sensor.Config    `yaml:"sensor"`
	Profiles      profiles.Options `yaml:"profiles"`
	OnExit        string           `yaml:"on_exit"` // the gear left in Varnish when the daemon stops: keep, light, moderate or heavy
	Hooks         Hooks            `yaml:"hooks"`
	Control       Control          `yaml:"control"`
	Log           Log              `yaml:"log"`
	PIDFile       string           `yaml:"pid_file"`       // the daemon's pid file
	MetricsListen string           `yaml:"metrics_listen"` // address of the Prometheus metrics and the status page (host:port); "": none
	History       History          `yaml:"history"`
	Sites         []Site           `yaml:"sites"` // many sites on one Varnish, each in its own gear (sites.go)

	// GuestSecret is the secret of this start of the daemon that heavy's
	// guest answers must carry (profiles.Site.GuestSecret); never read
	// from or written to a file. "": heavy does not ask the daemon.
	GuestSecret string `yaml:"-"`
}

// History is the flight recorder: every sample and decision, one CSV file
// per day (the trace format simulate reads), older days compressed.
type History struct {
	Dir      string           `yaml:"dir"`       // where the day files are kept; "": no recording
	Keep     timefmt.Duration `yaml:"keep"`      // days of history kept; older files are removed
	MaxBytes numfmt.Bytes     `yaml:"max_bytes"` // the most the files may take together; the oldest go first
}

// Varnish lists the Varnish instances gearshift drives, and how.
type Varnish struct {
	// Mode is how a gear is applied: active makes the gear's profile the
	// active VCL; label points the VCL label "gearshift" at it and leaves
	// the active VCL (the site's own) alone.
	Mode    string           `yaml:"mode"`
	Timeout timefmt.Duration `yaml:"timeout"` // per admin command (loading a VCL gets longer)
	Targets []Target         `yaml:"targets"` // default one: 127.0.0.1:6082 with /etc/varnish/secret
}

// Target is one Varnish admin port (varnishd -T) and its secret file (-S).
type Target struct {
	Admin      string `yaml:"admin"`       // varnishd's -T: the admin port's address
	SecretFile string `yaml:"secret_file"` // varnishd's -S: the file holding the admin secret
	// Name is varnishd's -n (an instance name or its working directory) of
	// a Varnish on this machine: its traffic is read with varnishstat
	// (client_rps, backend_rps, backend_busy, …). "": the host's default
	// instance when the admin port is on loopback, else no traffic signals.
	Name string `yaml:"name"`
}

// Local tells whether the target's admin port is on this machine's
// loopback: its counters can be read with varnishstat.
func (t Target) Local() bool {
	host, _, err := net.SplitHostPort(t.Admin)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// Hysteresis tunes how eagerly the machine moves between states.
type Hysteresis struct {
	UpConfirm  int              `yaml:"up_confirm"`  // consecutive samples an enter rule must hold to shift up
	DownWindow timefmt.Duration `yaml:"down_window"` // how long the stay rule must not have held to shift down
	MinDwell   timefmt.Duration `yaml:"min_dwell"`   // least time in a gear before shifting down
	// DownTrafficRatio is the traffic guard: no step down while
	// client_rps is above this fraction of the rate the gear was entered
	// at; 0: off.
	DownTrafficRatio float64 `yaml:"down_traffic_ratio"`
}

// Values of varnish.mode.
const (
	ModeActive = "active"
	ModeLabel  = "label"
)

// Modes are the accepted values of varnish.mode.
var Modes = []string{ModeActive, ModeLabel}

// Hooks are commands the daemon runs on events.
type Hooks struct {
	// OnChange is run after every gear change (with sites: each site's):
	// the command and its arguments, without a shell, with
	// GEARSHIFT_FROM, GEARSHIFT_TO, GEARSHIFT_REASON, GEARSHIFT_MODE,
	// GEARSHIFT_SITE, GEARSHIFT_INCIDENT and (back in light)
	// GEARSHIFT_SUMMARY in its environment; []: none.
	OnChange []string         `yaml:"on_change"`
	Timeout  timefmt.Duration `yaml:"timeout"` // how long a hook may run; then its process group is killed
}

// Control is the daemon's control socket.
type Control struct {
	Socket string `yaml:"socket"` // the control socket (status, force, auto, reload)
	Group  string `yaml:"group"`  // a group that may read the status; "": root's
	// AdminGroup may also force, auto and reload; "": root only.
	AdminGroup string `yaml:"admin_group"`
}

// Log is where and how much the daemon logs.
type Log struct {
	File  string `yaml:"file"`  // the log file (JSON lines)
	Level string `yaml:"level"` // debug, info, warn or error
}

// defaultBands are the default rules of each gear (light has none). A
// gear added to state.All after Heavy fails to compile here until it has
// its rules; one added between, TestDefaultCoversGears.
var defaultBands [len(state.All)]Band = [...]Band{
	state.Light: {},
	state.Moderate: {
		Enter: Rule{"load_per_cpu": 0.70, "mem_available_pct": 20},
		Stay:  Rule{"load_per_cpu": 0.50, "mem_available_pct": 25},
	},
	state.Heavy: {
		Enter: Rule{"load_per_cpu": 1.50, "mem_available_pct": 10},
		Stay:  Rule{"load_per_cpu": 1.00, "mem_available_pct": 15},
	},
}

// Default returns the embedded defaults, matching a stock Debian/Ubuntu Varnish.
func Default() *Config {
	c := defaults()
	for g, b := range c.States.Bands() {
		if b != nil {
			*b = Band{Enter: maps.Clone(defaultBands[g].Enter), Stay: maps.Clone(defaultBands[g].Stay)}
		}
	}
	return c
}

// defaults are the defaults but the rules of the gears.
func defaults() *Config {
	return &Config{
		PollInterval: timefmt.Duration(time.Second),
		FastWindow:   timefmt.Duration(10 * time.Second),
		Varnish: Varnish{
			Mode:    ModeActive,
			Timeout: timefmt.Duration(2 * time.Second),
			Targets: []Target{{Admin: "127.0.0.1:6082", SecretFile: "/etc/varnish/secret"}},
		},
		Backend: profiles.DefaultBackend,
		Hysteresis: Hysteresis{
			UpConfirm:  3,
			DownWindow: timefmt.Duration(120 * time.Second),
			MinDwell:   timefmt.Duration(60 * time.Second),

			DownTrafficRatio: 0.6,
		},
		Sensor: sensor.Config{
			Probe:      sensor.ProbeConfig{Timeout: timefmt.Duration(time.Second)},
			Prometheus: sensor.PrometheusConfig{Timeout: timefmt.Duration(time.Second), MaxAge: timefmt.Duration(30 * time.Second)},
			PHPFPM:     sensor.PHPFPMConfig{Path: sensor.DefaultPHPFPMPath, Timeout: timefmt.Duration(sensor.DefaultPHPFPMTimeout)},
		},
		Profiles: profiles.DefaultOptions(),
		OnExit:   "keep",
		Hooks:    Hooks{Timeout: timefmt.Duration(30 * time.Second)},
		Control:  Control{Socket: "/run/gearshift/gearshift.sock"},
		Log:      Log{File: "/var/log/gearshift/gearshift.log", Level: "info"},
		PIDFile:  "/run/gearshift/gearshift.pid",
		History: History{
			Dir:      "/var/lib/gearshift/history",
			Keep:     timefmt.Duration(14 * 24 * time.Hour),
			MaxBytes: 200_000_000,
		},
	}
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

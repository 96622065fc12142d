// Package config is gearshift's configuration: the YAML file, its defaults,
// and the validation that refuses a bad one with every problem named by its
// key. The parts it configures own their blocks: the sources theirs
// (sensor.Config), the profiles theirs (profiles.Options).
package config

import (
	"bytes"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// DefaultPath is where gearshift looks for its config when --config is not given.
const DefaultPath = "/etc/gearshift/gearshift.yaml"

// Config is gearshift's whole configuration (SPEC section 6).
type Config struct {
	PollInterval  timefmt.Duration `yaml:"poll_interval"` // default 1s
	FastWindow    timefmt.Duration `yaml:"fast_window"`   // default 10s; 0 = Load1 alone
	CPUs          int              `yaml:"cpus"`          // default 0 = detect
	Varnish       Varnish          `yaml:"varnish"`
	Backend       profiles.Backend `yaml:"backend"`
	States        States           `yaml:"states"`
	Hysteresis    Hysteresis       `yaml:"hysteresis"`
	Sensor        sensor.Config    `yaml:"sensor"`
	Profiles      profiles.Options `yaml:"profiles"`
	OnExit        string           `yaml:"on_exit"` // default keep; or light, moderate, heavy
	Hooks         Hooks            `yaml:"hooks"`
	Control       Control          `yaml:"control"`
	Log           Log              `yaml:"log"`
	PIDFile       string           `yaml:"pid_file"`       // default /run/gearshift/gearshift.pid
	MetricsListen string           `yaml:"metrics_listen"` // default "" (off)
}

// Varnish lists the Varnish instances gearshift drives, and how.
type Varnish struct {
	// Mode is how a gear is applied: ModeActive (default) makes the gear's
	// profile the active VCL; ModeLabel points the label Label at it and
	// leaves the active VCL (the site's own) alone.
	Mode    string           `yaml:"mode"`
	Timeout timefmt.Duration `yaml:"timeout"` // per admin command, default 2s (loading a VCL gets longer)
	Targets []Target         `yaml:"targets"` // default one: 127.0.0.1:6082 with /etc/varnish/secret
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

// Hysteresis tunes how eagerly the machine moves between states.
type Hysteresis struct {
	UpConfirm  int              `yaml:"up_confirm"`  // default 3 samples
	DownWindow timefmt.Duration `yaml:"down_window"` // default 120s
	MinDwell   timefmt.Duration `yaml:"min_dwell"`   // default 60s
	// DownTrafficRatio: no step down while client_rps is above this
	// fraction of the rate the gear was entered at. Default 0.6; 0 = off.
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
	// OnChange is run after every gear change: the command and its
	// arguments, without a shell, with GEARSHIFT_FROM, GEARSHIFT_TO,
	// GEARSHIFT_REASON and GEARSHIFT_MODE in its environment. Default none.
	OnChange []string         `yaml:"on_change"`
	Timeout  timefmt.Duration `yaml:"timeout"` // default 30s; then the hook's process group is killed
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
		PollInterval: timefmt.Duration(time.Second),
		FastWindow:   timefmt.Duration(10 * time.Second),
		Varnish: Varnish{
			Mode:    ModeActive,
			Timeout: timefmt.Duration(2 * time.Second),
			Targets: []Target{{Admin: "127.0.0.1:6082", SecretFile: "/etc/varnish/secret"}},
		},
		Backend: profiles.DefaultBackend,
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
			DownWindow: timefmt.Duration(120 * time.Second),
			MinDwell:   timefmt.Duration(60 * time.Second),

			DownTrafficRatio: 0.6,
		},
		Sensor:   sensor.Config{Probe: sensor.ProbeConfig{Timeout: timefmt.Duration(time.Second)}},
		Profiles: profiles.DefaultOptions(),
		OnExit:   "keep",
		Hooks:    Hooks{Timeout: timefmt.Duration(30 * time.Second)},
		Control:  Control{Socket: "/run/gearshift/gearshift.sock"},
		Log:      Log{File: "/var/log/gearshift/gearshift.log", Level: "info"},
		PIDFile:  "/run/gearshift/gearshift.pid",
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

package config

import (
	"math"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/profiles"
)

// Rule is one enter or stay rule as the config writes it: a mapping from
// signal name (one of the config's signal set) to threshold.
type Rule map[string]float64

// Band holds the enter and stay rules of one non-light gear.
type Band struct {
	Enter Rule `yaml:"enter"` // signal: threshold; the gear is entered when any holds for up_confirm samples
	Stay  Rule `yaml:"stay"`  // looser thresholds; the gear is left when none has held for down_window
}

// States holds the enter and stay rules of the non-light gears.
type States struct {
	Moderate Band `yaml:"moderate"`
	Heavy    Band `yaml:"heavy"`
}

// Bands returns the band of each gear, by state (nil for light, which has
// none). A gear added to state.All fails to compile here until it has its
// field in States.
func (s *States) Bands() [len(state.All)]*Band {
	return [...]*Band{state.Light: nil, state.Moderate: &s.Moderate, state.Heavy: &s.Heavy}
}

// MarshalYAML writes the rule's conditions in the order of the signal set
// (what `gearshift config show` prints).
func (r Rule) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, s := range knownSignals.All() {
		v, ok := r[s.Name]
		if !ok {
			continue
		}
		var val yaml.Node
		if err := val.Encode(v); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s.Name}, &val)
	}
	for k, v := range r { // not in the set: validation refuses it, show it anyway
		if _, ok := knownSignals.Lookup(k); ok {
			continue
		}
		var val yaml.Node
		if err := val.Encode(v); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &val)
	}
	return n, nil
}

var _ yaml.Marshaler = Rule{}

// validateBands checks every gear's rules, that each stay rule is looser
// than its enter rule, and that each gear is entered on worse figures than
// the gear below it.
func (c *Config) validateBands(v *validator) {
	set, err := c.Signals()
	if err != nil {
		v.add("sensor", "%v", err)
		return
	}
	var below *Band
	var belowName string
	for st, b := range c.States.Bands() {
		if b == nil {
			continue
		}
		path := "states." + state.Gear(st).String()
		validateRule(v, set, path+".enter", b.Enter)
		validateRule(v, set, path+".stay", b.Stay)
		c.validateSources(v, set, path+".enter", b.Enter)
		c.validateSources(v, set, path+".stay", b.Stay)
		validateLooser(v, set, path, b.Enter, b.Stay)
		if below != nil {
			validateStricter(v, set, belowName+".enter.", path+".enter.", below.Enter, b.Enter)
		}
		below, belowName = b, path
	}
}

// inRange tells whether a threshold is in the signal's range, so that it is
// worth comparing with others (one out of range is reported once, by itself).
func inRange(s state.Signal, v float64) bool { return v > s.Min && v <= s.Max }

func validateRule(v *validator, set *state.Set, path string, r Rule) {
	for _, s := range set.All() {
		val, ok := r[s.Name]
		if !ok || inRange(s, val) {
			continue
		}
		switch {
		case s.Unit == "%" && s.Min == 0 && s.Max == 100:
			v.add(path+"."+s.Name, "must be a percentage above 0 and at most 100, got %g", val)
		case math.IsInf(s.Max, 1):
			v.add(path+"."+s.Name, "must be > %g, got %g", s.Min, val)
		default:
			v.add(path+"."+s.Name, "must be above %g and at most %g, got %g", s.Min, s.Max, val)
		}
	}
	names := map[string]int{}
	for i, n := range set.Names() {
		names[n] = i
	}
	for k := range r {
		if _, ok := set.Lookup(k); !ok {
			v.add(path+"."+k, "unknown key%s", suggest(k, names))
		}
	}
}

// validateSources refuses a rule on a signal whose source is not
// configured: the signal would never be available, so the rule could never
// hold. Such a problem is of kind Unsourced: a trace replayed offline carries
// the signal whatever the config says.
func (c *Config) validateSources(v *validator, set *state.Set, path string, r Rule) {
	hc := c.SensorConfig()
	for _, s := range set.All() {
		if _, ok := r[s.Name]; !ok {
			continue
		}
		if src, unsourced := sensor.Unsourced(hc, s.Name); unsourced {
			v.addKind(Unsourced, path+"."+s.Name, "needs %s to be set: %s comes from there, and without it the rule can never hold", src.Key, s.Name)
		}
	}
}

// validateLooser checks that the stay rule is looser than the enter rule:
// the gap is the hysteresis.
func validateLooser(v *validator, set *state.Set, path string, enter, stay Rule) {
	for _, s := range set.All() {
		e, okE := enter[s.Name]
		st, okS := stay[s.Name]
		if !okE || !okS || !inRange(s, e) || !inRange(s, st) || !s.Worse(st, e) {
			continue
		}
		op := "<="
		if s.Direction == state.Falls {
			op = ">="
		}
		v.add(path+".stay."+s.Name, "must be %s %s.enter.%s (%g): a stay rule is looser than its enter rule, got %g",
			op, path, s.Name, e, st)
	}
}

// validateStricter checks that the upper gear is entered on strictly worse
// figures than the lower one.
func validateStricter(v *validator, set *state.Set, lowerPath, upperPath string, lower, upper Rule) {
	for _, s := range set.All() {
		lo, okL := lower[s.Name]
		up, okU := upper[s.Name]
		if !okL || !okU || !inRange(s, lo) || !inRange(s, up) || s.Worse(up, lo) {
			continue
		}
		op := ">"
		if s.Direction == state.Falls {
			op = "<"
		}
		v.add(upperPath+s.Name, "must be %s %s%s (%g), got %g", op, lowerPath, s.Name, lo, up)
	}
}

// SensorConfig returns the sensor's view of the config: the CPUs, the
// sensor block, the local Varnish targets' names, the targets' admin
// ports and whether the profiles probe the backend.
func (c *Config) SensorConfig() sensor.HostConfig {
	hc := sensor.HostConfig{CPUs: c.CPUs, FastWindow: time.Duration(c.FastWindow), Sensor: c.Sensor, BackendProbe: c.Backend.Probe.URL != "", SitePools: c.sitePools()}
	for _, t := range c.Varnish.Targets {
		if t.Name != "" || t.Local() {
			hc.Varnish = append(hc.Varnish, t.Name)
		}
		hc.Admins = append(hc.Admins, sensor.AdminTarget{Addr: t.Admin, SecretFile: t.SecretFile})
	}
	return hc
}

// Signals returns the signal set of the config: what its rules may name,
// and what the daemon derives, shows and exports. The daemon builds it once
// per config and hands it to the machine, the status and the metrics.
func (c *Config) Signals() (*state.Set, error) { return sensor.Signals(c.SensorConfig()) }

// ShownSignals is the set a client of the daemon (status, check) describes
// the daemon's signals with: the config's, or every source's when the
// config's cannot be built.
func (c *Config) ShownSignals() *state.Set {
	if set, err := c.Signals(); err == nil {
		return set
	}
	return knownSignals
}

// knownSignals are the signals of every source, whatever is configured:
// the order `config show` writes rules in.
var knownSignals = func() *state.Set {
	set, err := sensor.Signals(sensor.HostConfig{})
	if err != nil {
		panic("config: " + err.Error())
	}
	return set
}()

// Site returns what the profiles are built from.
func (c *Config) Site() profiles.Site {
	site := profiles.Site{Options: c.Profiles, Backend: c.Backend, GuestSecret: c.GuestSecret}
	if site.Backend.MaxConnections == 0 {
		site.Backend.MaxConnections, _ = profiles.DetectMaxConnections()
	}
	for _, t := range c.Varnish.Targets {
		site.SecretFiles = append(site.SecretFiles, t.SecretFile)
	}
	site.StatusPaths = c.Sensor.PHPFPM.StatusPaths()
	if c.HasSites() {
		for _, s := range c.SiteList(site.Backend.MaxConnections) {
			site.Routes = append(site.Routes, profiles.Route{Site: s.Name, Hosts: s.Hosts, MaxConnections: s.MaxConnections, PurgeTokenFile: s.PurgeTokenFile})
		}
	}
	return site
}

// StateConfig returns the state machine's view of the config, deciding on
// the signals of set (the config's, see Signals).
func (c *Config) StateConfig(set *state.Set) state.Config {
	sc := state.Config{
		Signals:    set,
		UpConfirm:  c.Hysteresis.UpConfirm,
		DownWindow: time.Duration(c.Hysteresis.DownWindow),
		MinDwell:   time.Duration(c.Hysteresis.MinDwell),

		DownTrafficRatio: c.Hysteresis.DownTrafficRatio,
	}
	for st, b := range c.States.Bands() {
		if b != nil {
			sc.Bands[st] = state.Band{Enter: state.Rule(b.Enter), Stay: state.Rule(b.Stay)}
		}
	}
	return sc
}

// addSourceRules adds the conditions of the sources the config turns on
// (sensor.Source.Rules) to the rules the file did not give (given is false
// for their key path, "states.heavy.stay"). A condition that would break
// the order of the rules is left out: a stay condition the gear's enter
// rule has no condition on the signal for, or one worse than it (then the
// enter threshold is the stay's), and an enter condition not strictly
// between the gears' around it.
func (c *Config) addSourceRules(given func(path string) bool) {
	hc := c.SensorConfig()
	bands := c.States.Bands()
	for _, src := range sensor.Sources {
		if !src.On(hc) {
			continue
		}
		for st, b := range bands {
			if b == nil {
				continue
			}
			path := "states." + state.Gear(st).String()
			if !given(path + ".enter") {
				for name, v := range src.Rules[st].Enter {
					if _, ok := b.Enter[name]; !ok && c.orderedEnter(st, name, v) {
						if b.Enter == nil {
							b.Enter = Rule{}
						}
						b.Enter[name] = v
					}
				}
			}
			if !given(path + ".stay") {
				for name, v := range src.Rules[st].Stay {
					e, ok := b.Enter[name]
					if _, have := b.Stay[name]; have || !ok {
						continue
					}
					if s, found := knownSignals.Lookup(name); found && s.Worse(v, e) {
						v = e
					}
					if b.Stay == nil {
						b.Stay = Rule{}
					}
					b.Stay[name] = v
				}
			}
		}
	}
}

// orderedEnter tells whether v as the enter threshold of name in gear st
// is strictly worse than the gear's below and better than the gear's above.
func (c *Config) orderedEnter(st int, name string, v float64) bool {
	s, ok := knownSignals.Lookup(name)
	if !ok {
		return false
	}
	bands := c.States.Bands()
	for lo := st - 1; lo >= 0; lo-- {
		if b := bands[lo]; b != nil {
			if w, ok := b.Enter[name]; ok && !s.Worse(v, w) {
				return false
			}
		}
	}
	for hi := st + 1; hi < len(bands); hi++ {
		if b := bands[hi]; b != nil {
			if w, ok := b.Enter[name]; ok && !s.Worse(w, v) {
				return false
			}
		}
	}
	return true
}

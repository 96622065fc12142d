package profiles

import (
	"math"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
)

// Rule is one enter or stay rule as the config writes it: a mapping from
// signal name (a row of the state machine's table of signals) to threshold.
type Rule map[string]float64

// Band holds the enter and stay rules of one non-light gear.
type Band struct {
	Enter Rule `yaml:"enter"`
	Stay  Rule `yaml:"stay"`
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

// MarshalYAML writes the rule's conditions in the order of the table of
// signals (what `gearshift config show` prints).
func (r Rule) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, s := range state.Table() {
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
	for k, v := range r { // not in the table: validation refuses it, show it anyway
		if _, ok := state.Lookup(k); ok {
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

// decodeRule reads a rule: a mapping of signal names to numbers. A rule in
// the file replaces the default rule as a whole; null is a rule with no
// condition.
func (d *decoder) decodeRule(n *yaml.Node, v *Rule, path string) {
	*v = Rule{}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping of keys, got %s", describe(n))
		return
	}
	names := map[string]int{}
	for i, name := range state.SignalNames() {
		names[name] = i
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		for val.Kind == yaml.AliasNode {
			val = val.Alias
		}
		sub := path + "." + k.Value
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, sub, "given twice (first on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[sub] = val.Line
		if _, ok := names[k.Value]; !ok {
			d.fail(k, sub, "unknown key%s", suggest(k.Value, names))
			continue
		}
		var f float64
		if val.Kind != yaml.ScalarNode || val.Decode(&f) != nil {
			d.fail(val, sub, "want a number, got %s", describe(val))
			continue
		}
		(*v)[k.Value] = f
	}
}

// validateBands checks every gear's rules, that each stay rule is looser
// than its enter rule, and that each gear is entered on worse figures than
// the gear below it.
func (c *Config) validateBands(v *validator) {
	var below *Band
	var belowName string
	for st, b := range c.States.Bands() {
		if b == nil {
			continue
		}
		path := "states." + state.State(st).String()
		validateRule(v, path+".enter", b.Enter)
		validateRule(v, path+".stay", b.Stay)
		c.validateSources(v, path+".enter", b.Enter)
		c.validateSources(v, path+".stay", b.Stay)
		validateLooser(v, path, b.Enter, b.Stay)
		if below != nil {
			validateStricter(v, belowName+".enter.", path+".enter.", below.Enter, b.Enter)
		}
		below, belowName = b, path
	}
}

// inRange tells whether a threshold is in the signal's range, so that it is
// worth comparing with others (one out of range is reported once, by itself).
func inRange(s state.Signal, v float64) bool { return v > s.Min && v <= s.Max }

func validateRule(v *validator, path string, r Rule) {
	for _, s := range state.Table() {
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
	for k := range r {
		if _, ok := state.Lookup(k); !ok {
			v.add(path+"."+k, "unknown key%s", suggest(k, signalIndex()))
		}
	}
}

// validateSources refuses a rule on a signal whose source is not
// configured: the signal would never be available, so the rule could never
// hold. Such a problem is of kind Unsourced: a trace replayed offline carries
// the signal whatever the config says.
func (c *Config) validateSources(v *validator, path string, r Rule) {
	for _, s := range state.Table() {
		if _, ok := r[s.Name]; !ok || s.Source == "" || c.SourceConfigured(s.Source) {
			continue
		}
		v.addKind(Unsourced, path+"."+s.Name, "needs %s to be set: %s comes from there, and without it the rule can never hold", s.Source, s.Name)
	}
}

// SourceConfigured tells whether the source a signal names (Signal.Source,
// a config key) is configured. A key it does not know is reported as
// configured: the signal table and this switch are kept in step by a test.
func (c *Config) SourceConfigured(key string) bool {
	switch key {
	case "varnish.targets[].name":
		for _, t := range c.Varnish.Targets {
			if t.Name != "" {
				return true
			}
		}
		return false
	case "sensor.apache_status":
		return c.Sensor.ApacheStatus != ""
	case "sensor.probe.url":
		return c.Sensor.Probe.URL != ""
	case "sensor.inject_file":
		return c.Sensor.InjectFile != ""
	}
	return true
}

// sourceKeys are the keys SourceConfigured knows.
var sourceKeys = []string{"varnish.targets[].name", "sensor.apache_status", "sensor.probe.url", "sensor.inject_file"}

// validateLooser checks that the stay rule is looser than the enter rule:
// the gap is the hysteresis.
func validateLooser(v *validator, path string, enter, stay Rule) {
	for _, s := range state.Table() {
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
func validateStricter(v *validator, lowerPath, upperPath string, lower, upper Rule) {
	for _, s := range state.Table() {
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

func signalIndex() map[string]int {
	m := map[string]int{}
	for i, n := range state.SignalNames() {
		m[n] = i
	}
	return m
}

// SensorConfig returns the sensor's view of the config: the CPUs and the
// optional sources.
func (c *Config) SensorConfig() sensor.HostConfig {
	hc := sensor.HostConfig{
		CPUs:         c.CPUs,
		Cgroup:       c.Sensor.Cgroup,
		ApacheStatus: c.Sensor.ApacheStatus,
		ProbeURL:     c.Sensor.Probe.URL,
		ProbeTimeout: time.Duration(c.Sensor.Probe.Timeout),
		InjectFile:   c.Sensor.InjectFile,
	}
	for _, t := range c.Varnish.Targets {
		if t.Name != "" {
			hc.Varnish = append(hc.Varnish, t.Name)
		}
	}
	return hc
}

// StateConfig returns the state machine's view of the config.
func (c *Config) StateConfig() state.Config {
	sc := state.Config{
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

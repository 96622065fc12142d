// Package timefmt is how gearshift writes durations and times for people:
// the config's durations ("90s", "2m"), reasons and logs.
package timefmt

import (
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written in YAML as a Go duration string
// ("90s", "2m").
type Duration time.Duration

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

// String returns the duration as Short does.
func (d Duration) String() string { return Short(time.Duration(d)) }

// Short returns d as a short Go duration string: "2m" rather than "2m0s",
// "1h30m" rather than "1h30m0s".
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

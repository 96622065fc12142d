// Package timefmt is how gearshift writes durations and times for people:
// the config's durations ("90s", "2m"), reasons and logs.
package timefmt

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Stamp is the layout of a full time for people: "2026-11-30 14:51:02 UTC".
const Stamp = "2006-01-02 15:04:05 MST"

// Duration is a time.Duration written in YAML as a Go duration string
// ("90s", "2m").
type Duration time.Duration

// UnmarshalYAML reads a Go duration string such as "90s" or "2m".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration such as 90s or 2m", n.Line)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (use e.g. 90s, 2m, 1h)", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration reads a Go duration ("90s", "1h30m") or a number of days
// ("14d", "1.5d"), which Go's durations lack and history periods need.
func ParseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.ParseFloat(days, 64)
		if err != nil || v < 0 || v > 100*365 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(v * float64(24*time.Hour)), nil
	}
	return time.ParseDuration(s)
}

// Set reads a flag's value as ParseDuration does (pflag.Value).
func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (use e.g. 90s, 2h, 7d)", s)
	}
	*d = Duration(v)
	return nil
}

// Type names the flag's value in help (pflag.Value).
func (d *Duration) Type() string { return "duration" }

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

var (
	_ yaml.Unmarshaler = (*Duration)(nil)
	_ yaml.Marshaler   = Duration(0)
)

// String returns the duration as Short does, or in days ("14d") when it
// is a whole number of them.
func (d Duration) String() string {
	const day = 24 * time.Hour
	if v := time.Duration(d); v >= day && v%day == 0 {
		return fmt.Sprintf("%dd", v/day)
	}
	return Short(time.Duration(d))
}

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

// Seconds returns d in whole seconds below an hour ("120s", as a reason
// quotes down_window), else as Go writes it, to the second ("1h0m0s").
func Seconds(d time.Duration) string {
	if d < time.Hour {
		return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
	}
	return d.Round(time.Second).String()
}

// Coarse returns d for a glance, truncated to two units: "45s", "12m05s",
// "3h05m", "2d4h"; a negative d is "0s".
func Coarse(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// Offset returns d as an offset into a recording, to the second: "+0:40:00".
func Offset(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("+%d:%02d:%02d", s/3600, s/60%60, s%60)
}

// Clock returns t as a time of day, "15:04" (with seconds: "15:04:05"),
// with the date when t is not on now's day: "2006-01-02 15:04". t is shown
// in its own location; convert it first to show it in another.
func Clock(t, now time.Time, seconds bool) string {
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		if seconds {
			return t.Format("15:04:05")
		}
		return t.Format("15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// Round writes d to the second, as Short does: "4m", "1h2m3s".
func Round(d time.Duration) string { return Short(d.Round(time.Second)) }

// Share writes part as a percentage of whole, to a tenth ("37.5%"); "-"
// when whole is not positive.
func Share(part, whole time.Duration) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

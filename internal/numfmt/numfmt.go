// Package numfmt formats numbers for people and plugins to read.
package numfmt

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"gopkg.in/yaml.v3"
)

// Trim formats v with at most prec decimals, without trailing zeros
// (1.50 is "1.5", 2.00 is "2").
func Trim(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Bytes is a size in bytes, written in YAML as people write sizes: "200MB",
// "1.5 GiB", "4096".
type Bytes int64

// UnmarshalYAML reads a size such as 200MB or 1GiB.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a size such as 200MB", n.Line)
	}
	v, err := humanize.ParseBytes(s)
	if err != nil || v > 1<<62 {
		return fmt.Errorf("line %d: %q is not a size (use e.g. 200MB, 1GiB)", n.Line, s)
	}
	*b = Bytes(v)
	return nil
}

// MarshalYAML writes the size as String does.
func (b Bytes) MarshalYAML() (any, error) { return b.String(), nil }

// String returns the size in SI units: "200 MB".
func (b Bytes) String() string { return humanize.Bytes(uint64(max(b, 0))) }

var (
	_ yaml.Unmarshaler = (*Bytes)(nil)
	_ yaml.Marshaler   = Bytes(0)
)

// Count writes a number of requests for people: 912, 9.1k, 184k, 1.2M.
func Count(v float64) string {
	n, unit := humanize.ComputeSI(v)
	switch {
	case unit == "":
		return fmt.Sprintf("%.0f", v)
	case n < 10:
		return fmt.Sprintf("%.1f%s", n, unit)
	}
	return fmt.Sprintf("%.0f%s", n, unit)
}

// Round rounds v half away from zero to places decimals, for what is
// logged and shown (a switch time, a signal's value).
func Round(v float64, places int) float64 {
	p := 1.0
	for i := 0; i < places; i++ {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}

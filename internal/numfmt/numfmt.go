// Package numfmt formats numbers for people and plugins to read.
package numfmt

import (
	"strconv"
	"strings"
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

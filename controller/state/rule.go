package state

import (
	"fmt"
	"strings"
)

// cond is one configured condition of a rule, evaluated against signals.
type cond struct {
	name    string
	value   *float64 // the signal; nil when unavailable (no PSI)
	limit   float64
	atLeast bool // holds when value >= limit; otherwise when value <= limit
	prec    int  // decimals of the signal in reasons
}

func (c cond) holds() bool {
	if c.value == nil {
		return false
	}
	if c.atLeast {
		return *c.value >= c.limit
	}
	return *c.value <= c.limit
}

// String renders the condition as it stands: "load_per_cpu 1.82 >= 1.50"
// when it holds, "load_per_cpu 0.62 < 1.00" when it does not.
func (c cond) String() string {
	if c.value == nil {
		return c.name + " unavailable"
	}
	op := map[[2]bool]string{{true, true}: ">=", {true, false}: "<", {false, true}: "<=", {false, false}: ">"}[[2]bool{c.atLeast, c.holds()}]
	return fmt.Sprintf("%s %.*f %s %s", c.name, c.prec, *c.value, op, limitString(c.limit, c.prec))
}

// limitString prints a threshold as it was most likely written: 1.50 next
// to a two-decimal load, 20 rather than 20.0 for a percentage.
func limitString(v float64, prec int) string {
	if prec >= 2 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%g", v)
}

func (r Rule) conds(sig Signals) []cond {
	var cs []cond
	if r.LoadPerCPU != nil {
		v := sig.LoadPerCPU
		cs = append(cs, cond{"load_per_cpu", &v, *r.LoadPerCPU, true, 2})
	}
	if r.MemAvailablePct != nil {
		var v *float64
		if !sig.memUnknown {
			v = &sig.MemAvailablePct
		}
		cs = append(cs, cond{"mem_available_pct", v, *r.MemAvailablePct, false, 1})
	}
	if r.PSICPU != nil {
		cs = append(cs, cond{"psi_cpu", sig.PSICPU, *r.PSICPU, true, 1})
	}
	if r.PSIMem != nil {
		cs = append(cs, cond{"psi_mem", sig.PSIMem, *r.PSIMem, true, 1})
	}
	return cs
}

// Holds reports whether any configured condition of r holds for sig. A rule
// with no condition never holds; a PSI condition never holds without PSI.
func (r Rule) Holds(sig Signals) bool {
	for _, c := range r.conds(sig) {
		if c.holds() {
			return true
		}
	}
	return false
}

// explain lists the conditions that hold ("load_per_cpu 1.82 >= 1.50 and
// mem_available_pct 8.0 <= 10"), or when none does, the conditions whose
// signal is available, as the reason why not.
func (r Rule) explain(sig Signals) string {
	cs := r.conds(sig)
	if len(cs) == 0 {
		return "no condition configured"
	}
	var held, available, unavailable []string
	for _, c := range cs {
		switch {
		case c.holds():
			held = append(held, c.String())
		case c.value != nil:
			available = append(available, c.String())
		default:
			unavailable = append(unavailable, c.String())
		}
	}
	switch {
	case len(held) > 0:
		return strings.Join(held, " and ")
	case len(available) > 0:
		return strings.Join(available, ", ")
	}
	return strings.Join(unavailable, ", ")
}

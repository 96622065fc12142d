package state

import (
	"fmt"
	"strings"
)

// cond is one configured condition of a rule, evaluated against signals.
type cond struct {
	sig   Signal
	value *float64 // the signal; nil when unavailable
	limit float64
}

func (c cond) holds() bool {
	return c.value != nil && c.sig.Holds(*c.value, c.limit)
}

// String renders the condition as it stands: "load_per_cpu 1.82 >= 1.50"
// when it holds, "load_per_cpu 0.62 < 1.00" when it does not.
func (c cond) String() string {
	if c.value == nil {
		return c.sig.Name + " unavailable"
	}
	op := c.sig.Op()
	if !c.holds() {
		op = map[string]string{">=": "<", "<=": ">"}[op]
	}
	return fmt.Sprintf("%s %.*f %s %s", c.sig.Name, c.sig.Precision, *c.value, op, c.sig.FormatLimit(c.limit))
}

// conds lists the rule's conditions in the order of the set. A key that
// names no signal of the set is no condition (validation refuses it).
func (r Rule) conds(set *Set, sig Signals) []cond {
	var cs []cond
	for _, s := range set.All() {
		limit, ok := r[s.Name]
		if !ok {
			continue
		}
		cs = append(cs, cond{s, sig.Ptr(s.Name), limit})
	}
	return cs
}

// Holds reports whether any configured condition of r holds for sig. A rule
// with no condition never holds; a condition never holds on a signal that
// is unavailable or not in set.
func (r Rule) Holds(set *Set, sig Signals) bool {
	for _, c := range r.conds(set, sig) {
		if c.holds() {
			return true
		}
	}
	return false
}

// HoldsAtOnce reports whether a condition of r on a signal of set that
// needs no confirmation (Signal.AtOnce) holds for sig.
func (r Rule) HoldsAtOnce(set *Set, sig Signals) bool {
	return r.holdsOn(set, sig, func(s Signal) bool { return s.AtOnce })
}

// holdsOn reports whether a condition of r on a signal of set that which
// accepts holds for sig.
func (r Rule) holdsOn(set *Set, sig Signals, which func(Signal) bool) bool {
	for _, c := range r.conds(set, sig) {
		if which(c.sig) && c.holds() {
			return true
		}
	}
	return false
}

// explain lists the conditions that hold ("load_per_cpu 1.82 >= 1.50 and
// mem_available_pct 8.0 <= 10"), or when none does, the conditions whose
// signal is available, as the reason why not.
func (r Rule) explain(set *Set, sig Signals) string {
	cs := r.conds(set, sig)
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

package state

import (
	"fmt"
	"maps"
	"time"

	"github.com/gearshift/gearshift/internal/timefmt"
)

// Decision is the machine's answer to one input: the gear to be in, and why.
type Decision struct {
	Gear        Gear
	From        Gear      // gear before this decision
	Changed     bool      // Gear != From
	Reason      string    // for humans: "load_per_cpu 1.82 >= 1.50 for 3 samples"
	Forced      bool      // pinned by the operator
	ForcedUntil time.Time // zero when not forced or pinned until auto
	Since       time.Time // time of the last transition (or of the first input)
	Signals     Signals   // derived inputs of the last sample seen
	Transitions int       // transitions so far
	// Cause says what made this decision: CauseAuto (the rules),
	// CauseForced (an operator's force or auto) or CauseExpired (a force
	// deadline passing). It names the cause of a transition when Changed.
	Cause string
}

// Causes of a decision (Decision.Cause), the cause label of
// gearshift_transitions_total.
const (
	CauseAuto    = "auto"
	CauseForced  = "forced"
	CauseExpired = "expired"
)

// Causes lists the causes of a decision.
var Causes = []string{CauseAuto, CauseForced, CauseExpired}

// Machine is the three-state machine of docs/signals.md#the-decision. It is
// pure: time and samples are inputs, it reads no clock and does no I/O. It is not safe for
// concurrent use; one goroutine owns it.
type Machine struct {
	cfg  Config
	fast EWMA

	cur     Decision
	started bool

	forced bool
	until  time.Time

	run       [len(All)]int       // consecutive samples each state's enter rule held
	atOnce    [len(All)]bool      // each state's enter rule held on the last sample on a signal that needs no confirmation
	stayHeld  [len(All)]time.Time // last sample at which each state's stay rule held
	dwellFrom time.Time           // start of the min_dwell clock: last transition or release of a force

	entryRPS [len(All)]*float64 // client_rps at which each state was entered going up; nil: unknown
}

// New returns a machine in light, in auto mode. fastWindow is the window of
// the run-queue EWMA; 0 turns the fast signal off (Load1 alone).
func New(cfg Config, fastWindow time.Duration) *Machine {
	m := &Machine{cfg: cfg.clone(), fast: EWMA{Window: fastWindow}}
	m.cur = Decision{Gear: Light, From: Light, Reason: "starting in light"}
	return m
}

// SetConfig replaces the rules and windows (a reload). The current state,
// a force, and the history (confirmation counts, when each stay rule last
// held, the dwell clock, the EWMA) are kept; the history was gathered under
// the old rules.
func (m *Machine) SetConfig(cfg Config, fastWindow time.Duration) {
	m.cfg = cfg.clone()
	if fastWindow != m.fast.Window {
		m.fast.Window = fastWindow
		if fastWindow <= 0 {
			m.fast.Reset()
		}
	}
}

// Current returns the last decision.
func (m *Machine) Current() Decision { return m.cur }

// Step decides on the reading r observed at now.
func (m *Machine) Step(now time.Time, r Reading) Decision {
	m.start(now)
	sig := derive(now, m.cfg.Signals, r, &m.fast)
	for st := Light + 1; st <= Heaviest; st++ {
		b := m.band(st)
		if b.Enter.Holds(m.cfg.Signals, sig) {
			m.run[st]++
		} else {
			m.run[st] = 0
		}
		m.atOnce[st] = b.Enter.HoldsAtOnce(m.cfg.Signals, sig)
		if b.Stay.Holds(m.cfg.Signals, sig) {
			m.stayHeld[st] = now
		}
	}
	// The traffic guard holds the current gear as its stay rule would: the
	// way down waits for down_window after the traffic has gone too.
	if _, ok := m.trafficGuard(m.cur.Gear, sig); ok {
		m.stayHeld[m.cur.Gear] = now
	}

	cur := m.cur.Gear
	var released string
	cause := CauseAuto
	if m.forced {
		if m.until.IsZero() || now.Before(m.until) {
			return m.decide(now, cur, m.forcedReason(now), sig, CauseForced)
		}
		released = fmt.Sprintf("force expired at %s, resuming from %s; ", timefmt.Clock(m.until, now, false), cur)
		m.forced, m.until = false, time.Time{}
		m.dwellFrom = now
		cause = CauseExpired
	}
	next, reason := m.auto(now, cur, sig)
	return m.decide(now, next, released+reason, sig, cause)
}

// Rush decides between two samples on one fresh figure v of the signal
// name, the other signals as the last sample had them: only a gear whose
// enter rule holds at once on it (Signal.AtOnce) is entered, with its
// stay rule held as on a sample. Nothing else moves: no rule's
// confirmation counts a rush, a gear is never left, and a force holds. A surge the backend turns
// away is entered when the first refusals are seen, not at the next poll.
func (m *Machine) Rush(now time.Time, name string, v float64) Decision {
	if m.forced || !m.started {
		return m.unchanged()
	}
	sig := m.cur.Signals
	sig.Values = maps.Clone(sig.Values)
	if sig.Values == nil {
		sig.Values = map[string]float64{}
	}
	sig.Values[name] = v
	cur := m.cur.Gear
	for st := Heaviest; st > cur; st-- {
		if enter := m.band(st).Enter; enter.HoldsAtOnce(m.cfg.Signals, sig) {
			m.atOnce[st] = true
			if m.band(st).Stay.Holds(m.cfg.Signals, sig) {
				m.stayHeld[st] = now
			}
			return m.decide(now, st, fmt.Sprintf("%s at once (the backend turns fetches away)", enter.explain(m.cfg.Signals, sig)), sig, CauseAuto)
		}
	}
	return m.unchanged()
}

// Pressing tells whether g's enter rule has held for up_confirm samples
// up to the last one, or held on the last one on a signal that needs no
// confirmation: the distress that calls for g is still there.
func (m *Machine) Pressing(g Gear) bool {
	return g > Light && g.Valid() && (m.run[g] >= m.upConfirm() || m.atOnce[g])
}

// PressingOnBackend tells whether g is Pressing and its enter rule holds
// on the last sample on a signal of the backend's own distress
// (Signal.OfBackend): the distress is the backend's, not only the
// machine's load or memory.
func (m *Machine) PressingOnBackend(g Gear) bool {
	return m.Pressing(g) && m.band(g).Enter.holdsOn(m.cfg.Signals, m.cur.Signals, Signal.OfBackend)
}

// Force pins the machine to s until the deadline; a zero until pins it
// until Auto. A deadline is checked by Step: the force expires on the first
// sample at or after it.
func (m *Machine) Force(now time.Time, s Gear, until time.Time) Decision {
	m.start(now)
	m.forced, m.until = true, until
	return m.decide(now, s, m.forcedReason(now), m.cur.Signals, CauseForced)
}

// Auto releases a force. The machine resumes from the pinned state, with the
// dwell clock reset: it steps down no sooner than min_dwell from now.
func (m *Machine) Auto(now time.Time) Decision {
	m.start(now)
	if !m.forced {
		return m.unchanged()
	}
	m.forced, m.until = false, time.Time{}
	m.dwellFrom = now
	return m.decide(now, m.cur.Gear, fmt.Sprintf("released by operator, resuming from %s", m.cur.Gear), m.cur.Signals, CauseForced)
}

// Expire releases a force whose deadline has passed, as Step does, for a
// caller that has no sample to step with (the sensors are failing): an
// operator's "for 30m" must not become "until the sensors recover".
func (m *Machine) Expire(now time.Time) Decision {
	m.start(now)
	if !m.forced || m.until.IsZero() || now.Before(m.until) {
		return m.unchanged()
	}
	until := m.until
	m.forced, m.until = false, time.Time{}
	m.dwellFrom = now
	return m.decide(now, m.cur.Gear, fmt.Sprintf("force expired at %s, resuming from %s", timefmt.Clock(until, now, false), m.cur.Gear), m.cur.Signals, CauseExpired)
}

// Resume sets the state of a machine that has made no decision yet, in auto
// mode, without counting a transition: a daemon restarted while Varnish runs
// heavy resumes heavy instead of dropping to light until the load is
// confirmed again. The dwell clock starts at now. It does nothing once the
// machine has stepped, been forced or resumed.
func (m *Machine) Resume(now time.Time, st Gear, reason string) Decision {
	if m.started {
		return m.unchanged()
	}
	m.start(now)
	m.cur.Gear, m.cur.From, m.cur.Reason = st, st, reason
	return m.cur
}

// unchanged returns the current decision as one that changed nothing.
func (m *Machine) unchanged() Decision {
	d := m.cur
	d.From, d.Changed = d.Gear, false
	m.cur = d
	return d
}

func (m *Machine) start(now time.Time) {
	if !m.started {
		m.started = true
		m.cur.Since = now
		m.dwellFrom = now
	}
}

func (m *Machine) decide(now time.Time, next Gear, reason string, sig Signals, cause string) Decision {
	d := m.cur
	d.From, d.Gear = d.Gear, next
	d.Changed = next != d.From
	d.Reason = reason
	d.Cause = cause
	d.Forced = m.forced
	d.ForcedUntil = m.until
	d.Signals = sig
	if d.Changed {
		d.Since = now
		d.Transitions++
		m.dwellFrom = now
		m.recordEntry(d.From, next, sig)
	}
	m.cur = d
	return d
}

// recordEntry remembers the client_rps at which the states from from up to
// to were entered, and forgets it for the states above to when stepping down.
func (m *Machine) recordEntry(from, to Gear, sig Signals) {
	for st := to + 1; st <= Heaviest; st++ {
		m.entryRPS[st] = nil
	}
	for st := from + 1; st <= to; st++ {
		m.entryRPS[st] = sig.Ptr(ClientRPS)
	}
}

// minEntryRPS is the least client_rps that counts as an entry rate for the
// traffic guard. A gear entered below it (no traffic to speak of: the load
// came from elsewhere) has no entry rate, and the guard is off for it;
// otherwise any traffic at all would exceed ratio × 0 and hold the gear for
// ever.
const minEntryRPS = 1.0

// trafficGuard tells whether the traffic guard holds st, and why:
// "client_rps 410 > 0.6 × 520 at entry", or a signal past its distress
// mark ("phpfpm_queue 3 > 0: the backend is in distress"). It is off
// without a ratio and in light. The traffic half is off without a
// client_rps now, and for a gear entered without one or below
// minEntryRPS; the distress half while no signal is past its mark.
func (m *Machine) trafficGuard(st Gear, sig Signals) (string, bool) {
	ratio, entry := m.cfg.DownTrafficRatio, m.entryRPS[st]
	if ratio <= 0 || st == Light {
		return "", false
	}
	if why, ok := m.distress(sig); ok {
		return why, true
	}
	if entry == nil || *entry < minEntryRPS {
		return "", false
	}
	rps, ok := sig.Get(ClientRPS)
	if !ok || rps <= ratio**entry {
		return "", false
	}
	s, _ := m.cfg.Signals.Lookup(ClientRPS)
	return fmt.Sprintf("%s %s > %g × %s at entry", ClientRPS, s.Format(rps), ratio, s.Format(*entry)), true
}

// distress names the first signal of the set past its distress mark.
func (m *Machine) distress(sig Signals) (string, bool) {
	for _, s := range m.cfg.Signals.list {
		if s.Distress == nil {
			continue
		}
		if v, ok := sig.Get(s.Name); ok && s.Worse(v, *s.Distress) {
			op := ">"
			if s.Direction == Falls {
				op = "<"
			}
			return fmt.Sprintf("%s %s %s %s: the backend is in distress", s.Name, s.Format(v), op, s.FormatLimit(*s.Distress)), true
		}
	}
	return "", false
}

// auto applies the rules of docs/signals.md#the-decision from cur.
func (m *Machine) auto(now time.Time, cur Gear, sig Signals) (Gear, string) {
	confirm := m.upConfirm()
	for st := Heaviest; st > cur; st-- {
		if m.run[st] >= confirm {
			return st, fmt.Sprintf("%s for %d samples", m.band(st).Enter.explain(m.cfg.Signals, sig), m.run[st])
		}
		if m.atOnce[st] {
			return st, fmt.Sprintf("%s at once (the backend turns fetches away)", m.band(st).Enter.explain(m.cfg.Signals, sig))
		}
	}
	var pending string
	for st := Heaviest; st > cur; st-- {
		if n := m.run[st]; n > 0 {
			pending = fmt.Sprintf("%s enter rule held %d of %d samples (%s)", st, n, confirm, m.band(st).Enter.explain(m.cfg.Signals, sig))
			break
		}
	}
	if cur == Light {
		if pending != "" {
			return Light, pending
		}
		return Light, fmt.Sprintf("%s enter rule not held (%s)", Light+1, m.band(Light+1).Enter.explain(m.cfg.Signals, sig))
	}
	if pending != "" {
		pending = "; " + pending
	}

	stay := m.band(cur).Stay
	if stay.Holds(m.cfg.Signals, sig) {
		return cur, fmt.Sprintf("stay rule of %s holds (%s)%s", cur, stay.explain(m.cfg.Signals, sig), pending)
	}
	if why, ok := m.trafficGuard(cur, sig); ok {
		return cur, "stay: " + why + pending
	}
	if last := m.stayHeld[cur]; !last.IsZero() && now.Sub(last) < m.cfg.DownWindow {
		return cur, fmt.Sprintf("stay rule of %s held %s ago, within down_window %s%s",
			cur, timefmt.Seconds(now.Sub(last)), timefmt.Seconds(m.cfg.DownWindow), pending)
	}
	if since := now.Sub(m.dwellFrom); since < m.cfg.MinDwell {
		return cur, fmt.Sprintf("stay rule of %s not held, but only %s of min_dwell %s passed%s",
			cur, timefmt.Seconds(since), timefmt.Seconds(m.cfg.MinDwell), pending)
	}
	return cur - 1, fmt.Sprintf("stay rule of %s not held within %s (%s)", cur, timefmt.Seconds(m.cfg.DownWindow), stay.explain(m.cfg.Signals, sig))
}

func (m *Machine) forcedReason(now time.Time) string {
	if m.until.IsZero() {
		return "forced by operator until auto"
	}
	return "forced by operator until " + timefmt.Clock(m.until, now, false)
}

func (m *Machine) band(st Gear) Band { return m.cfg.Bands[st] }

func (m *Machine) upConfirm() int {
	if m.cfg.UpConfirm < 1 {
		return 1
	}
	return m.cfg.UpConfirm
}

// Package siteplan decides which site takes which gear under the server's
// decision: the pure part of the loop's allocator, which the daemon and
// `gearshift simulate` both call.
package siteplan

import (
	"fmt"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// Escalation is how long the distress must hold after a site took the
// machine's gear before the next site, by backend share, takes it too
// (docs/sites.md, "Which site shifts").
const Escalation = 10 * time.Second

// Site is one site as the allocator sees it: its gear and its own pin.
type Site struct {
	Name      string
	Gear      state.Gear
	Pinned    bool       // a pin of this site holds (its expiry is the caller's)
	Pin       state.Gear // the pinned gear
	PinReason string     // the reason a pinned site is given
}

// Input is what the allocator decides on besides the sites.
type Input struct {
	Machine state.Decision // the server's decision
	// Spread: every site not pinned follows the machine's gear (no sites
	// key, or a pin of every site).
	Spread bool
	// Shares are the sites' shares of the backend requests of the last
	// minute; nil while they are not known.
	Shares map[string]float64
	// Pressing: Escalation has passed since a site last climbed and the
	// machine's gear is still called for by a signal of the backend's
	// distress (state.Machine.PressingOnBackend).
	Pressing bool
}

// Move puts one site in a gear (its own again, with a new reason, when it
// does not change).
type Move struct {
	Site   string
	Gear   state.Gear
	Reason string
	Cause  string // state.CauseAuto, CauseForced or CauseExpired
	Climb  bool   // the site took the machine's gear for its backend share
}

// Plan returns the moves that put every site where it should be under
// in, in the order of sites, a climb last: a pinned site in its pin; every
// site in the machine's gear under Spread, or when the machine climbs
// while the shares are not known (0.4's way); no site above the machine's
// gear; and, while the machine is above light, the site not pinned below
// its gear with the largest share takes it, when no site holds it yet (is
// in it, or comes down to it) or the distress is Pressing. A site not
// named in a move keeps its gear and reason.
func Plan(sites []Site, in Input) []Move {
	d := in.Machine
	known := in.Shares != nil
	lift := !known && d.Changed && d.Gear > d.From
	cause := d.Cause
	if cause == "" {
		cause = state.CauseAuto
	}
	var moves []Move
	held := false // a site not pinned is in d's gear, or comes down to it
	for _, s := range sites {
		switch {
		case s.Pinned:
			moves = append(moves, Move{Site: s.Name, Gear: s.Pin, Reason: s.PinReason, Cause: state.CauseForced})
		case in.Spread || s.Gear > d.Gear || lift:
			moves = append(moves, Move{Site: s.Name, Gear: d.Gear, Reason: d.Reason, Cause: cause})
			held = held || s.Gear > d.Gear
		default:
			held = held || s.Gear == d.Gear
		}
	}
	if in.Spread || !known || d.Gear == state.Lightest || held && !in.Pressing {
		return moves
	}
	// Here a site not pinned was moved only down to d's gear (no Spread,
	// no lift with the shares known): one below it is one not moved.
	top, best := "", 0.0
	for _, s := range sites {
		if !s.Pinned && s.Gear < d.Gear && in.Shares[s.Name] > best {
			top, best = s.Name, in.Shares[s.Name]
		}
	}
	if top == "" {
		return moves
	}
	return append(moves, Move{Site: top, Gear: d.Gear, Climb: true, Cause: state.CauseAuto,
		Reason: fmt.Sprintf("site %s: %.0f %% of backend requests; %s", top, 100*best, d.Reason)})
}

// ReliefShare: after a site takes the machine's gear, the next site takes
// it only while the backend still gets at least this share of the
// requests a second it got over the Escalation before that climb; when
// they fell by more, the distress left is the signals' lag, not the
// sites' doing (docs/sites.md, "Which site shifts").
const ReliefShare = 0.5

// Relieved tells whether the backend's request rate now, over the last
// Escalation, fell below ReliefShare of before, the rate over the
// Escalation before the last climb; false when before is 0. The caller
// tells Plan the distress is not Pressing when it is.
func Relieved(before, now float64) bool { return before > 0 && now < ReliefShare*before }

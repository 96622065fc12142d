package sensor

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gearshift/gearshift/profiles"
)

// BackendBusy is the signal of the fetches Varnish refused at a backend's
// connection limit, per second over the last fast_window.
const BackendBusy = "backend_busy"

// busyField selects the counters of the fetches Varnish did not attempt
// because the backend already held its .max_connections: one per backend
// of each loaded VCL.
const busyField = "VBE.*.busy"

// busyBackend tells whether the counter name counts fetches of the
// site's turned away (profiles.TurnsFetchesAway).
func busyBackend(name string) bool {
	return strings.HasPrefix(name, "VBE.") && strings.HasSuffix(name, ".busy") && profiles.TurnsFetchesAway(name)
}

// parseBusy returns the busy counters of varnishstat's values, by name.
func parseBusy(values map[string]json.RawMessage) map[string]uint64 {
	busy := map[string]uint64{}
	for name, raw := range values {
		if !busyBackend(name) {
			continue
		}
		var field struct {
			Value uint64 `json:"value"`
		}
		if json.Unmarshal(raw, &field) == nil {
			busy[name] = field.Value
		}
	}
	return busy
}

// busySince returns the fetches refused between two readings: each
// counter's growth. A counter new since prev (a VCL loaded in between,
// its counters begun at zero) counts whole; one gone (a VCL discarded)
// counts nothing, and never makes the sum go down.
func busySince(prev, now map[string]uint64) uint64 {
	var n uint64
	for name, v := range now {
		if p, ok := prev[name]; !ok {
			n += v
		} else if v > p {
			n += v - p
		}
	}
	return n
}

// busyWindow turns each poll's refused fetches into backend_busy: the
// fetches refused over the last Window, per second of it (the average
// over fast_window, as the load's fast signal). A surge's first second of
// refusals already shows, and one poll's blip weighs a tenth of a 10 s
// window. Without a window, the poll's own rate.
type busyWindow struct {
	Window time.Duration
	polls  []busyPoll
}

type busyPoll struct {
	at      time.Time
	refused float64
}

// add records the refused fetches of the poll read at at (rate: the
// same per second of the poll) and returns backend_busy.
func (w *busyWindow) add(at time.Time, refused, rate float64) float64 {
	if w.Window <= 0 {
		w.polls = nil
		return rate
	}
	w.polls = append(w.polls, busyPoll{at, refused})
	var sum float64
	keep := w.polls[:0]
	for _, p := range w.polls {
		if at.Sub(p.at) < w.Window {
			keep = append(keep, p)
			sum += p.refused
		}
	}
	w.polls = keep
	return sum / w.Window.Seconds()
}

// reset forgets the polls: the counters are unknown for a while.
func (w *busyWindow) reset() { w.polls = nil }

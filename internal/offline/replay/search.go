package replay

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
)

// Suggestion is the outcome of a search: the current thresholds' and, when
// the search found better ones, those.
type Suggestion struct {
	History    string // the history directory
	ConfigName string // the current config's path, or "embedded defaults"
	Within     time.Duration
	Searched   []string // the thresholds searched: "heavy.enter.load_per_cpu"
	Replays    int
	Current    Outcome
	// States is the suggested states: block and Best how it did; nil when
	// nothing did better than the current thresholds (or there was no
	// distress to do better on).
	States *config.States
	Best   *Outcome
	// Sites are what each site did and would have done, for a history
	// with sites (replaySites); nil without.
	Sites []TuneSite

	h *History
}

// coord is one threshold the search moves: an enter threshold of a gear.
type coord struct {
	gear state.Gear
	sig  state.Signal
}

func (c coord) String() string { return fmt.Sprintf("%s.enter.%s", c.gear, c.sig.Name) }

// Search looks for the thresholds that do best on the objective (see
// TuneHelp) over the history, starting from those of cfg, whose
// hysteresis and fast_window it keeps. It replays at most MaxReplays
// times; without distress periods, only the current thresholds.
func (h *History) Search(cfg *config.Config, within time.Duration) (*Suggestion, error) {
	set, err := cfg.Signals()
	if err != nil {
		return nil, err
	}
	base := cfg.StateConfig(set)
	replay := func(st config.States) Outcome {
		c := *cfg
		c.States = st
		return h.Replay(c.StateConfig(set), within)
	}
	s := &Suggestion{Within: within, h: h, Current: replay(cfg.States), Replays: 1}
	if len(h.Periods) == 0 {
		return s, nil
	}
	var coords []coord
	for g := state.Heaviest; g > state.Lightest; g-- {
		for _, sig := range set.All() {
			if _, ok := base.Bands[g].Enter[sig.Name]; ok {
				coords = append(coords, coord{g, sig})
				s.Searched = append(s.Searched, coord{g, sig}.String())
			}
		}
	}
	one := slices.Index(factors, 1)
	best := slices.Repeat([]int{one}, len(coords))
	bestOut := s.Current
	tried := map[string]bool{fmt.Sprint(cfg.States): true}
	for pass := 0; pass < 3; pass++ {
		improved := false
		for ci := range coords {
			// The thresholds of one coordinate differ from the best only
			// there: they are replayed side by side, then judged in order.
			var vecs [][]int
			var sts []config.States
			for fi := range factors {
				if fi == best[ci] || s.Replays+len(vecs) >= MaxReplays {
					continue
				}
				vec := slices.Clone(best)
				vec[ci] = fi
				st, ok := candidate(cfg, coords, vec)
				if !ok || tried[fmt.Sprint(st)] {
					continue
				}
				tried[fmt.Sprint(st)] = true
				vecs, sts = append(vecs, vec), append(sts, st)
			}
			outs := make([]Outcome, len(sts))
			var wg sync.WaitGroup
			sem := make(chan struct{}, runtime.GOMAXPROCS(0))
			for i := range sts {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					outs[i] = replay(sts[i])
				}()
			}
			wg.Wait()
			s.Replays += len(sts)
			for i, out := range outs {
				if out.better(bestOut) {
					best, bestOut, improved = vecs[i], out, true
					s.States, s.Best = &sts[i], &outs[i]
				}
			}
		}
		if !improved {
			break
		}
	}
	return s, nil
}

// candidate returns the states of cfg with each threshold of coords
// scaled by its factor in vec, and whether they are valid.
func candidate(cfg *config.Config, coords []coord, vec []int) (config.States, bool) {
	st := config.States{
		Moderate: config.Band{Enter: maps.Clone(cfg.States.Moderate.Enter), Stay: maps.Clone(cfg.States.Moderate.Stay)},
		Heavy:    config.Band{Enter: maps.Clone(cfg.States.Heavy.Enter), Stay: maps.Clone(cfg.States.Heavy.Stay)},
	}
	bands := st.Bands()
	for i, c := range coords {
		f := factors[vec[i]]
		if f == 1 {
			continue
		}
		b := bands[c.gear]
		old := b.Enter[c.sig.Name]
		v := old * f
		if c.sig.Direction == state.Falls {
			v = old / f
		}
		v = min(round2(v), c.sig.Max)
		if v <= c.sig.Min || v == old {
			return st, false
		}
		b.Enter[c.sig.Name] = v
		if stay, ok := b.Stay[c.sig.Name]; ok {
			b.Stay[c.sig.Name] = min(round2(stay*v/old), c.sig.Max)
		}
	}
	c := *cfg
	c.States = st
	var ce *config.Error
	if err := c.ValidateSettings(); errors.As(err, &ce) {
		for _, p := range ce.Problems {
			if p.Kind == config.Setting {
				return st, false
			}
		}
	} else if err != nil {
		return st, false
	}
	return st, true
}

// round2 rounds v to two significant digits, as people write thresholds.
func round2(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 2, 64), 64)
	if err != nil || math.IsInf(r, 0) {
		return v
	}
	return r
}

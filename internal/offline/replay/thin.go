package replay

import (
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// thinner keeps at most max records of a stream for a chart: the records
// fall into stretches of equal length, doubled whenever there are too
// many, and each stretch keeps its heaviest record, set at the stretch's
// start so that the records are evenly spaced (a chart sees a gap where
// stretches are missing), and the heaviest gear the candidate was in over
// it. Weeks of records are drawn in a few thousand pixels anyway.
type thinner struct {
	max   int
	start time.Time
	width time.Duration // of a stretch; 0 until the first record
	pts   []point
}

type point struct {
	s       trace.Sample
	cand    state.Gear
	stretch int64
}

func (th *thinner) add(s trace.Sample, cand state.Gear) {
	if th.max <= 0 {
		return
	}
	if th.width == 0 {
		th.start, th.width = s.Time, time.Second
	}
	p := point{s: s, cand: cand, stretch: int64(s.Time.Sub(th.start) / th.width)}
	if n := len(th.pts); n > 0 && th.pts[n-1].stretch == p.stretch {
		th.pts[n-1] = heavier(th.pts[n-1], p)
	} else {
		th.pts = append(th.pts, p)
	}
	for len(th.pts) > th.max {
		th.width *= 2
		out := th.pts[:0]
		for _, q := range th.pts {
			q.stretch = int64(q.s.Time.Sub(th.start) / th.width)
			if n := len(out); n > 0 && out[n-1].stretch == q.stretch {
				out[n-1] = heavier(out[n-1], q)
				continue
			}
			out = append(out, q)
		}
		th.pts = out
	}
}

// heavier merges two points of a stretch: the record of the heavier
// recorded gear (then load), and the heavier candidate gear.
func heavier(a, b point) point {
	la := a.s.Reading.Load1 / float64(max(a.s.Reading.CPUs, 1))
	lb := b.s.Reading.Load1 / float64(max(b.s.Reading.CPUs, 1))
	keep := a
	if b.s.Recorded.Gear > a.s.Recorded.Gear || (b.s.Recorded.Gear == a.s.Recorded.Gear && lb > la) {
		keep = b
	}
	keep.cand = max(a.cand, b.cand)
	keep.stretch = a.stretch
	return keep
}

func (th *thinner) points() ([]trace.Sample, []state.Gear) {
	if len(th.pts) == 0 {
		return nil, nil
	}
	ss := make([]trace.Sample, len(th.pts))
	cs := make([]state.Gear, len(th.pts))
	for i, p := range th.pts {
		ss[i], cs[i] = p.s, p.cand
		if th.width > time.Second {
			t := th.start.Add(time.Duration(p.stretch) * th.width)
			ss[i].Time, ss[i].Reading.Time = t, t
		}
	}
	return ss, cs
}

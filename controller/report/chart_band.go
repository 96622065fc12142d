package report

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// gaps marks the samples that follow a gap in the recording, as Builder
// counts them.
func gaps(samples []trace.Sample) []bool {
	out := make([]bool, len(samples))
	var minStep time.Duration
	for i := 1; i < len(samples); i++ {
		dt := samples[i].Time.Sub(samples[i-1].Time)
		if dt <= 0 {
			continue
		}
		if minStep == 0 || dt < minStep {
			minStep = dt
		}
		out[i] = Gap(dt, minStep)
	}
	return out
}

// band is the gear band: one row per gear sequence, each cut into runs of
// one gear.
type band struct{ rows []bandRow }

type bandRow struct {
	label string
	runs  []run
}

type run struct {
	from, to float64
	gear     state.Gear
}

// maxSiteRows bounds the sites the band shows a row for.
const maxSiteRows = 8

// gearBand builds the band of the recorded gears (the top row), of the
// candidate's, and of the sites that left light (the first maxSiteRows to,
// at the bottom, "site NAME"). A gear holds until the next sample, except
// across a gap.
func gearBand(samples []trace.Sample, gaps []bool, candidate []state.Gear) band {
	var b band
	for _, site := range surgedSites(samples) {
		b.rows = append(b.rows, bandRow{label: "site " + site, runs: runs(samples, gaps, func(i int) (state.Gear, bool) {
			if r := samples[i].Recorded; r != nil && r.Sites != nil {
				return r.SiteGear(site), true
			}
			return 0, false
		})})
	}
	if candidate != nil {
		b.rows = append(b.rows, bandRow{label: CandidateLabel, runs: runs(samples, gaps, func(i int) (state.Gear, bool) {
			return candidate[i], true
		})})
	}
	recorded := runs(samples, gaps, func(i int) (state.Gear, bool) {
		if r := samples[i].Recorded; r != nil {
			return r.Gear, true
		}
		return 0, false
	})
	if len(recorded) > 0 {
		b.rows = append(b.rows, bandRow{label: "gear", runs: recorded})
	}
	return b
}

// surgedSites are the sites that left light in samples, in the order
// they did, maxSiteRows at most.
func surgedSites(samples []trace.Sample) []string {
	var out []string
	for _, s := range samples {
		if s.Recorded == nil {
			continue
		}
		for _, site := range s.Recorded.Sites {
			if site.Gear > state.Lightest && !slices.Contains(out, site.Name) {
				if out = append(out, site.Name); len(out) == maxSiteRows {
					return out
				}
			}
		}
	}
	return out
}

func runs(samples []trace.Sample, gaps []bool, gear func(int) (state.Gear, bool)) []run {
	var out []run
	open := false
	for i, s := range samples {
		g, ok := gear(i)
		t := unix(s.Time)
		if open {
			out[len(out)-1].to = t
			if gaps[i] {
				out[len(out)-1].to = unix(samples[i-1].Time)
				open = false
			}
		}
		switch {
		case !ok:
			open = false
		case open && out[len(out)-1].gear == g:
		default:
			out = append(out, run{from: t, to: t, gear: g})
			open = true
		}
	}
	return out
}

// Plot fills each run of each row in its gear's color (plot.Plotter).
func (b band) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, row := range b.rows {
		y0, y1 := trY(float64(i)-0.4), trY(float64(i)+0.4)
		for _, r := range row.runs {
			x0, x1 := trX(r.from), trX(r.to)
			if x1-x0 < 0.5 {
				x1 = x0 + 0.5 // a short run stays visible
			}
			c.FillPolygon(gearColors[r.gear], c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
		}
	}
}

// DataRange is the band's extent (plot.DataRanger).
func (b band) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, row := range b.rows {
		for _, r := range row.runs {
			xmin, xmax = math.Min(xmin, r.from), math.Max(xmax, r.to)
		}
	}
	return xmin, xmax, -0.5, float64(len(b.rows)) - 0.5
}

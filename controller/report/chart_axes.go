package report

import (
	"math"
	"time"

	"gonum.org/v1/plot"

	"github.com/gearshift/gearshift/internal/numfmt"
)

// floor starts p's y axis at 0, with room above the highest value for
// the legend.
func floor(p *plot.Plot) {
	p.Y.Min = 0
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	p.Y.Max *= 1.2
}

// countTicks are plot.DefaultTicks labelled as Count writes numbers (12k).
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = numfmt.Count(ticks[i].Value)
		}
	}
	return ticks
}

// timeSteps are the spacings of the time axis's ticks, in seconds.
var timeSteps = []float64{10, 30, 60, 120, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400}

// timeTicks put ticks on round UTC times (unix seconds); without labels
// on all but the bottom panel, whose labels serve the stack.
type timeTicks struct{ labels bool }

func (t timeTicks) Ticks(lo, hi float64) []plot.Tick {
	step := timeSteps[len(timeSteps)-1]
	for _, s := range timeSteps {
		if (hi-lo)/s <= 8 {
			step = s
			break
		}
	}
	layout := "15:04"
	switch {
	case step >= 86400:
		layout = "Jan 2"
	case hi-lo > 86400:
		layout = "Jan 2 15:04"
	case step < 60:
		layout = "15:04:05"
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		tk := plot.Tick{Value: v}
		if t.labels {
			tk.Label = time.UnixMilli(int64(v * 1000)).UTC().Format(layout)
		}
		ticks = append(ticks, tk)
	}
	return ticks
}

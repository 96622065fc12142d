package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// ChartOptions shape a chart of a period.
type ChartOptions struct {
	Title         string
	Width, Height float64 // in points; 0: DefaultWidth, DefaultHeight
	// Candidate is optional: one gear per sample (what a replay under
	// another config decided), drawn as a second gear band labelled
	// "candidate".
	Candidate []state.Gear
}

// The size of a chart when ChartOptions leave it out, in points.
const (
	DefaultWidth  = 900
	DefaultHeight = 480
)

// PNGDPI is the resolution PNG draws at: 96 dots per inch, the CSS pixel,
// so that a PNG shows at the size the SVG does (900 × 480 points are
// 1200 × 640 pixels).
const PNGDPI = 96

// MaxPoints bounds the points of a series: a longer period is cut into as
// many slices of time and each slice keeps its worst value (the highest
// for a signal that rises with pressure), so no peak is lost.
const MaxPoints = 1500

// maxOther bounds the signals besides load and requests drawn in the
// normalised panel.
const maxOther = 6

// CandidateLabel is the label of the candidate's gear band.
const CandidateLabel = "candidate"

// gearColors are the gears' colors in the band, by gear. A gear added to
// state.All after Heavy fails to compile here until it has its colour;
// one added between, TestGearColors.
var gearColors [len(state.All)]color.Color = [...]color.Color{
	state.Light:    color.RGBA{R: 0x66, G: 0xbb, B: 0x6a, A: 0xff},
	state.Moderate: color.RGBA{R: 0xff, G: 0xb3, B: 0x00, A: 0xff},
	state.Heavy:    color.RGBA{R: 0xe5, G: 0x39, B: 0x35, A: 0xff},
}

// lineColors are the series' colors, in turn.
var lineColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
}

// sans is the chart's font, drawn from the fonts gonum/plot embeds.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// SVG draws the chart of samples (see Chart) as an SVG document that
// starts at its <svg> element, with no XML prolog, so that it can be
// written inline in an HTML page as it is.
func SVG(w io.Writer, samples []trace.Sample, set *state.Set, opt ChartOptions) error {
	s, err := InlineSVG(samples, set, opt)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// InlineSVG is SVG's document as a string, for an HTML template.
func InlineSVG(samples []trace.Sample, set *state.Set, opt ChartOptions) (string, error) {
	w, h := opt.size()
	c := vgsvg.New(w, h)
	if err := chart(draw.New(c), samples, set, opt); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("draw chart: %w", err)
	}
	doc := buf.String()
	// vgsvg writes an XML prolog and a comment before the element, which
	// HTML does not want inline.
	i := strings.Index(doc, "<svg")
	if i < 0 {
		return "", errors.New("draw chart: no <svg> element in the output")
	}
	return doc[i:], nil
}

// PNG draws the chart of samples (see SVG) as a PNG image of PNGDPI.
func PNG(w io.Writer, samples []trace.Sample, set *state.Set, opt ChartOptions) error {
	width, height := opt.size()
	c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(PNGDPI), vgimg.UseBackgroundColor(color.White))
	if err := chart(draw.New(c), samples, set, opt); err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

func (o ChartOptions) size() (w, h vg.Length) {
	w, h = DefaultWidth, DefaultHeight
	if o.Width > 0 {
		w = vg.Length(o.Width)
	}
	if o.Height > 0 {
		h = vg.Length(o.Height)
	}
	return w, h
}

// panel is one plot of the stack and its share of the height.
type panel struct {
	p      *plot.Plot
	weight float64
}

// chart draws the stacked panels on a shared time axis: the gear band (and
// the candidate's), load_per_cpu, the other signals the samples have
// (normalised to 0–1) and Varnish's requests per second.
func chart(dc draw.Canvas, samples []trace.Sample, set *state.Set, opt ChartOptions) error {
	if len(samples) == 0 {
		return ErrEmpty
	}
	if opt.Candidate != nil && len(opt.Candidate) != len(samples) {
		return fmt.Errorf("draw chart: %d candidate gears for %d samples", len(opt.Candidate), len(samples))
	}
	if set == nil {
		set = builtin
	}
	t0, t1 := unix(samples[0].Time), unix(samples[len(samples)-1].Time)
	if t1-t0 < 60 {
		t1 = t0 + 60
	}
	s := series{samples: samples, gaps: gaps(samples), t0: t0, t1: t1}

	var panels []panel
	if band := gearBand(samples, s.gaps, opt.Candidate); len(band.rows) > 0 {
		p := newPlot()
		p.Add(band) // over the grid, which it hides
		names := make([]string, len(band.rows))
		for i, r := range band.rows {
			names[i] = r.label
		}
		p.NominalY(names...)
		p.Y.Min, p.Y.Max = -0.5, float64(len(names))-0.5
		panels = append(panels, panel{p, 0.5 * float64(len(names))})
	}
	if p := s.derivedPanel(set); p != nil {
		panels = append(panels, panel{p, 2})
	}
	if p := s.otherPanel(set); p != nil {
		panels = append(panels, panel{p, 2})
	}
	if p := s.requestsPanel(); p != nil {
		panels = append(panels, panel{p, 2})
	}
	for i, pn := range panels {
		pn.p.X.Min, pn.p.X.Max = t0, t1
		pn.p.X.Tick.Marker = timeTicks{labels: i == len(panels)-1}
	}
	last := panels[len(panels)-1].p
	last.X.Label.Text = "UTC, from " + samples[0].Time.UTC().Format("2006-01-02 15:04:05")

	dc.FillPolygon(color.White, []vg.Point{dc.Min, {X: dc.Max.X, Y: dc.Min.Y}, dc.Max, {X: dc.Min.X, Y: dc.Max.Y}})
	const headerHeight = 22
	header := draw.Crop(dc, 0, 0, dc.Max.Y-dc.Min.Y-headerHeight, 0)
	drawHeader(header, opt.Title)
	layout(draw.Crop(dc, 0, -8, 0, -headerHeight), panels)
	return nil
}

// layout stacks the panels in c, their data areas of heights in
// proportion to their weights and aligned left and right.
func layout(c draw.Canvas, panels []panel) {
	full := c.Max.Y - c.Min.Y
	overhead := make([]vg.Length, len(panels))
	var sumOverhead vg.Length
	var sumWeight float64
	for i, pn := range panels {
		d := pn.p.DataCanvas(c)
		overhead[i] = full - (d.Max.Y - d.Min.Y)
		sumOverhead += overhead[i]
		sumWeight += pn.weight
	}
	data := max(full-sumOverhead, 10)
	canvases := make([]draw.Canvas, len(panels))
	top := c.Max.Y
	for i, pn := range panels {
		h := overhead[i] + data*vg.Length(pn.weight/sumWeight)
		canvases[i] = draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: c.Min.X, Y: top - h}, Max: vg.Point{X: c.Max.X, Y: top},
		}}
		top -= h
	}
	var left, right vg.Length
	for i, pn := range panels {
		d := pn.p.DataCanvas(canvases[i])
		left, right = max(left, d.Min.X-canvases[i].Min.X), max(right, canvases[i].Max.X-d.Max.X)
	}
	for i, pn := range panels {
		d := pn.p.DataCanvas(canvases[i])
		cc := draw.Crop(canvases[i], left-(d.Min.X-canvases[i].Min.X), -(right - (canvases[i].Max.X - d.Max.X)), 0, 0)
		pn.p.Draw(cc)
	}
}

// drawHeader writes the title on the left of c and the gears' colors and
// names on its right.
func drawHeader(c draw.Canvas, title string) {
	sty := textStyle(11)
	y := c.Min.Y + (c.Max.Y-c.Min.Y)/2
	sty.YAlign = draw.YCenter
	if title != "" {
		c.FillText(sty, vg.Point{X: c.Min.X + 8, Y: y}, title)
	}
	x := c.Max.X - 8
	for i := len(state.All) - 1; i >= 0; i-- {
		name := state.All[i].String()
		x -= sty.Width(name)
		c.FillText(sty, vg.Point{X: x, Y: y}, name)
		x -= 14
		c.FillPolygon(gearColors[i], []vg.Point{{X: x, Y: y - 5}, {X: x + 10, Y: y - 5}, {X: x + 10, Y: y + 5}, {X: x, Y: y + 5}})
		x -= 12
	}
}

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(sans, size), Handler: plot.DefaultTextHandler}
}

// newPlot is a plot in the chart's fonts, with a grid under what it will
// draw.
func newPlot() *plot.Plot {
	p := plot.New()
	p.Add(grid())
	p.X.Label.TextStyle.Font = font.From(sans, 10)
	p.Y.Label.TextStyle.Font = font.From(sans, 10)
	p.X.Tick.Label.Font = font.From(sans, 9)
	p.Y.Tick.Label.Font = font.From(sans, 9)
	p.Legend.TextStyle.Font = font.From(sans, 9)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = 4
	p.Legend.ThumbnailWidth = 14
	return p
}

func grid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 0xe0}
	g.Horizontal.Color = color.Gray{Y: 0xe0}
	return g
}

func unix(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// series cuts the samples' values into lines of at most MaxPoints.
type series struct {
	samples []trace.Sample
	gaps    []bool
	t0, t1  float64
}

// line returns the segments (broken at gaps) of the value of each sample,
// each slice of time keeping its worst value.
func (s series) line(value func(trace.Sample) (float64, bool), worse func(a, b float64) bool) []plotter.XYs {
	var (
		segs   []plotter.XYs
		cur    plotter.XYs
		bucket = -1
		span   = s.t1 - s.t0
	)
	flush := func() {
		if len(cur) > 0 {
			segs = append(segs, cur)
		}
		cur, bucket = nil, -1
	}
	for i, smp := range s.samples {
		if s.gaps[i] {
			flush()
		}
		v, ok := value(smp)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		x := unix(smp.Time)
		b := min(int((x-s.t0)/span*MaxPoints), MaxPoints-1)
		if b == bucket && len(cur) > 0 {
			if worse(v, cur[len(cur)-1].Y) {
				cur[len(cur)-1] = plotter.XY{X: x, Y: v}
			}
			continue
		}
		cur, bucket = append(cur, plotter.XY{X: x, Y: v}), b
	}
	flush()
	return segs
}

func rises(a, b float64) bool { return a > b }

// addLine adds the segments of one series to p under one legend entry.
func addLine(p *plot.Plot, name string, segs []plotter.XYs, clr color.Color) {
	for i, seg := range segs {
		l, err := plotter.NewLine(seg)
		if err != nil {
			continue // not reached: the values are finite
		}
		l.Color, l.Width = clr, vg.Points(1.2)
		p.Add(l)
		if i == 0 {
			p.Legend.Add(name, l)
		}
	}
}

// derivedPanel draws the signals the machine derives (load_per_cpu).
func (s series) derivedPanel(set *state.Set) *plot.Plot {
	p := newPlot()
	n, name := 0, ""
	for _, sig := range set.All() {
		if sig.Raw() {
			continue
		}
		in := func(smp trace.Sample) (float64, bool) {
			return sig.Value(state.Input{Reading: smp.Reading, Load: smp.Reading.Load1})
		}
		if segs := s.line(in, sig.Worse); len(segs) > 0 {
			addLine(p, sig.Name, segs, lineColors[n%len(lineColors)])
			n, name = n+1, sig.Name
		}
	}
	if n == 0 {
		return nil
	}
	p.Y.Label.Text = "derived signals"
	if n == 1 {
		p.Legend = plot.NewLegend() // the axis names it
		p.Legend.TextStyle.Font = font.From(sans, 9)
		p.Y.Label.Text = name
	}
	floor(p)
	return p
}

// trafficSignals are drawn in the requests panel, not with the others.
var trafficSignals = map[string]bool{state.ClientRPS: true, sensor.BackendRPS: true}

// otherPanel draws a few other raw signals the samples have, each on 0–1:
// a bounded signal over its bound (a percentage over 100), another over its
// highest value in the period. A signal that never moves is left out.
func (s series) otherPanel(set *state.Set) *plot.Plot {
	p := newPlot()
	n := 0
	for _, sig := range set.All() {
		if !sig.Raw() || trafficSignals[sig.Name] || n == maxOther {
			continue
		}
		lo, hi, ok := s.extent(sig.Name)
		if !ok || lo == hi {
			continue
		}
		scale, name := 1.0, sig.Name
		switch {
		case sig.Bounded() && sig.Max != 1:
			scale, name = sig.Max, fmt.Sprintf("%s ÷ %g", sig.Name, sig.Max)
		case !sig.Bounded() && hi > 0:
			scale, name = hi, fmt.Sprintf("%s ÷ %s (peak)", sig.Name, sig.Format(hi))
		}
		in := func(smp trace.Sample) (float64, bool) {
			v, ok := smp.Reading.Values[sig.Name]
			return v / scale, ok
		}
		addLine(p, name, s.line(in, sig.Worse), lineColors[n%len(lineColors)])
		n++
	}
	if n == 0 {
		return nil
	}
	p.Y.Label.Text = "signals, 0–1"
	p.Y.Min, p.Y.Max = 0, 1.2 // room above 1 for the legend
	return p
}

// extent is the lowest and highest value of a raw signal in the samples.
func (s series) extent(name string) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, smp := range s.samples {
		if v, has := smp.Reading.Values[name]; has {
			lo, hi, ok = math.Min(lo, v), math.Max(hi, v), true
		}
	}
	return lo, hi, ok
}

// requestsPanel draws Varnish's client and backend requests per second,
// when recorded.
func (s series) requestsPanel() *plot.Plot {
	p := newPlot()
	n := 0
	for _, l := range []struct{ name, label string }{{state.ClientRPS, "client"}, {sensor.BackendRPS, "backend"}} {
		in := func(smp trace.Sample) (float64, bool) {
			v, ok := smp.Reading.Values[l.name]
			return v, ok
		}
		if segs := s.line(in, rises); len(segs) > 0 {
			addLine(p, l.label, segs, lineColors[n])
			n++
		}
	}
	if n == 0 {
		return nil
	}
	p.Y.Label.Text = "requests/s"
	p.Y.Tick.Marker = countTicks{}
	floor(p)
	return p
}

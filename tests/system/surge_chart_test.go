package system

import (
	"fmt"
	"image/color"
	"os"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/gearshift/gearshift/controller/report"
)

// The surge chart's colors: the gears as in gearshift report's chart,
// the series in its order.
var (
	surgeGearColors = map[string]color.Color{
		"light":    color.RGBA{R: 0x66, G: 0xbb, B: 0x6a, A: 0xff},
		"moderate": color.RGBA{R: 0xff, G: 0xb3, B: 0x00, A: 0xff},
		"heavy":    color.RGBA{R: 0xe5, G: 0x39, B: 0x35, A: 0xff},
	}
	surgeOffered = color.RGBA{R: 0x9e, G: 0xc5, B: 0xe8, A: 0xff}
	surgeOK      = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	surgeBackend = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	surgeP99     = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
)

// chart draws, per run, a panel of requests per second (offered, 200s,
// backend) over a panel of the p99 with the gear as a band at its top.
func (rep *surgeReport) chart(tb testing.TB, file string) {
	tb.Helper()
	runs := append(append([]*surgeRun{}, rep.runs...), rep.outage)
	var rows [][]*plot.Plot
	for _, r := range runs {
		rates, p99 := r.panels(rep)
		rows = append(rows, []*plot.Plot{rates}, []*plot.Plot{p99})
	}
	writePanels(tb, file, rows, vg.Length(230*len(runs)), 2)
}

// writePanels writes rows, one plot each, stacked and aligned, to the PNG
// file, height high with padY between the panels.
func writePanels(tb testing.TB, file string, rows [][]*plot.Plot, height vg.Length, padY vg.Length) {
	tb.Helper()
	c := vgimg.NewWith(vgimg.UseWH(vg.Length(report.DefaultWidth), height), vgimg.UseDPI(report.PNGDPI), vgimg.UseBackgroundColor(color.White))
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadTop: 6, PadBottom: 6, PadLeft: 6, PadRight: 10, PadY: padY}
	canvases := plot.Align(rows, tiles, draw.New(c))
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		tb.Fatalf("write %s: %v", file, err)
	}
}

func (r *surgeRun) panels(rep *surgeReport) (rates, p99 *plot.Plot) {
	secs := r.seconds()
	offered, ok, backend, lat := make(plotter.XYs, len(secs)), make(plotter.XYs, len(secs)), make(plotter.XYs, len(secs)), make(plotter.XYs, len(secs))
	for i, s := range secs {
		x := float64(i) + 0.5
		offered[i] = plotter.XY{X: x, Y: float64(s.offered)}
		ok[i] = plotter.XY{X: x, Y: float64(s.ok)}
		backend[i] = plotter.XY{X: x, Y: float64(s.backend)}
		lat[i] = plotter.XY{X: x, Y: s.p99.Seconds()}
	}
	title := fmt.Sprintf("%s: %s", r.name, runNotes[r.name])
	marks := []time.Duration{r.surgeAt, r.surgeEnd}
	if r.name == "outage" {
		title = fmt.Sprintf("outage: auto, %d req/s, Apache stopped between the dashed lines", rep.knobs.outageRate)
		marks = []time.Duration{r.outageFrom, r.outageTo}
	}
	end := float64(len(secs))

	rates = surgePlot(title, "req/s", end)
	top := 1.0
	for _, xy := range offered {
		top = max(top, xy.Y)
	}
	for _, xy := range backend {
		top = max(top, xy.Y)
	}
	rates.Y.Min, rates.Y.Max = 0, top*1.1
	addLine(rates, offered, surgeOffered, "offered").Width = vg.Points(3) // under the 200s, which follow it when all is well
	addLine(rates, ok, surgeOK, "200s")
	addLine(rates, backend, surgeBackend, "backend")
	addMarks(rates, marks, top*1.1)

	const band = 5.4 // the gear band, above the 5 s timeout
	p99 = surgePlot("", "p99 s", end)
	p99.X.Label.Text = "seconds from the run's start"
	p99.Y.Min, p99.Y.Max = 0, 6
	for i, s := range secs {
		if col, ok := surgeGearColors[s.gear]; ok {
			poly, err := plotter.NewPolygon(plotter.XYs{{X: float64(i), Y: band}, {X: float64(i + 1), Y: band}, {X: float64(i + 1), Y: 6}, {X: float64(i), Y: 6}})
			if err == nil {
				poly.Color, poly.LineStyle.Width = col, 0
				p99.Add(poly)
			}
		}
	}
	addLine(p99, lat, surgeP99, "p99 (gear band above)")
	addMarks(p99, marks, band)
	return rates, p99
}

func surgePlot(title, ylabel string, end float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 11
	p.Y.Label.Text = ylabel
	p.X.Min, p.X.Max = 0, max(end, 1)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = 9
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, xys plotter.XYs, c color.Color, name string) *draw.LineStyle {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return &draw.LineStyle{}
	}
	l.Color, l.Width = c, vg.Points(1.2)
	p.Add(l)
	p.Legend.Add(name, l)
	return &l.LineStyle
}

func addMarks(p *plot.Plot, at []time.Duration, top float64) {
	for _, t := range at {
		x := t.Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
		if err != nil {
			continue
		}
		l.Color, l.Dashes = color.Gray{Y: 0x70}, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
	}
}

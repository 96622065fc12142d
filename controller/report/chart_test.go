package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// svgTexts parses doc as XML and returns the text of its <text> elements
// and the fill colors of its paths.
func svgTexts(tb testing.TB, doc string) (texts []string, fills map[string]int) {
	tb.Helper()
	fills = map[string]int{}
	dec := xml.NewDecoder(strings.NewReader(doc))
	var inText bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatalf("the SVG is not XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inText = el.Name.Local == "text"
			for _, a := range el.Attr {
				if a.Name.Local == "style" {
					for _, decl := range strings.Split(a.Value, ";") {
						if v, ok := strings.CutPrefix(strings.TrimSpace(decl), "fill:"); ok {
							fills[v]++
						}
					}
				}
			}
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(el)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return texts, fills
}

func TestSVG(t *testing.T) {
	samples := surgeSamples(t)
	var b bytes.Buffer
	if err := SVG(&b, samples, testSet, ChartOptions{Title: "surge of December 1"}); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	if !strings.HasPrefix(doc, "<svg") {
		t.Errorf("the SVG starts with %.40q, want <svg for an HTML page", doc)
	}
	texts, fills := svgTexts(t, doc)
	joined := "|" + strings.Join(texts, "|") + "|"
	for _, want := range []string{"light", "moderate", "heavy", "gear", "surge of December 1", "load_per_cpu", "requests/s", "client", "backend", "03:10", "hit_ratio"} {
		if !strings.Contains(joined, "|"+want+"|") {
			t.Errorf("no text %q in the SVG; texts: %s", want, joined)
		}
	}
	if strings.Contains(joined, "|candidate|") {
		t.Error("a candidate band without a candidate")
	}
	// The band fills each gear's run in its color (and the legend's swatch).
	for i, name := range []string{"light", "moderate", "heavy"} {
		if n := fills[colorHex(i)]; n < 2 {
			t.Errorf("%s's color %s fills %d shapes, want its run and its swatch", name, colorHex(i), n)
		}
	}

	again, err := InlineSVG(samples, testSet, ChartOptions{Title: "surge of December 1"})
	if err != nil || again != doc {
		t.Errorf("a second drawing differs (err %v): the chart is not deterministic", err)
	}
}

// colorHex is gear i's color as vgsvg writes it.
func colorHex(i int) string {
	r, g, b, _ := gearColors[i].RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}

func TestSVGCandidate(t *testing.T) {
	samples := surgeSamples(t)
	cand := make([]state.Gear, len(samples))
	for i := range cand {
		cand[i] = state.Light
	}
	var b bytes.Buffer
	if err := SVG(&b, samples, testSet, ChartOptions{Candidate: cand}); err != nil {
		t.Fatal(err)
	}
	texts, _ := svgTexts(t, b.String())
	if !strings.Contains("|"+strings.Join(texts, "|")+"|", "|candidate|") {
		t.Errorf("no candidate band: %v", texts)
	}
	if err := SVG(io.Discard, samples, testSet, ChartOptions{Candidate: cand[1:]}); err == nil {
		t.Error("a candidate of the wrong length was drawn")
	}
	if err := SVG(io.Discard, nil, testSet, ChartOptions{}); err == nil {
		t.Error("a chart of no samples was drawn")
	}
}

func TestPNG(t *testing.T) {
	samples := surgeSamples(t)
	tests := []struct {
		name          string
		opt           ChartOptions
		width, height int
	}{
		{"default size", ChartOptions{}, 1200, 640},
		{"given size", ChartOptions{Width: 600, Height: 300}, 800, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PNG(&b, samples, testSet, tc.opt); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(&b)
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			if got := img.Bounds().Size(); got.X != tc.width || got.Y != tc.height {
				t.Errorf("size %v, want %dx%d", got, tc.width, tc.height)
			}
		})
	}
}

// TestDownsample: a long period keeps at most MaxPoints per series, and
// its peak.
func TestDownsample(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	samples := make([]trace.Sample, 20_000)
	for i := range samples {
		tm := start.Add(time.Duration(i) * time.Second)
		v := float64(i % 7)
		if i == 12_345 {
			v = 99
		}
		samples[i] = trace.Sample{Time: tm, Reading: state.Reading{Time: tm, Values: map[string]float64{state.ClientRPS: v}}}
	}
	s := series{samples: samples, gaps: gaps(samples), t0: unix(samples[0].Time), t1: unix(samples[len(samples)-1].Time)}
	segs := s.line(func(smp trace.Sample) (float64, bool) {
		v, ok := smp.Reading.Values[state.ClientRPS]
		return v, ok
	}, rises)
	if len(segs) != 1 || len(segs[0]) > MaxPoints || len(segs[0]) < MaxPoints/2 {
		t.Fatalf("%d segments of %d points, want one of at most %d", len(segs), len(segs[0]), MaxPoints)
	}
	var peak float64
	for _, p := range segs[0] {
		peak = max(peak, p.Y)
	}
	if peak != 99 {
		t.Errorf("peak %v after downsampling, want 99", peak)
	}

	// A gap breaks the line.
	for i := 10_000; i < len(samples); i++ {
		samples[i].Time = samples[i].Time.Add(time.Hour)
	}
	s = series{samples: samples, gaps: gaps(samples), t0: unix(samples[0].Time), t1: unix(samples[len(samples)-1].Time)}
	if segs := s.line(func(smp trace.Sample) (float64, bool) { return 1, true }, rises); len(segs) != 2 {
		t.Errorf("%d segments across a gap of an hour, want 2", len(segs))
	}
}

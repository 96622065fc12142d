package siteplan

import (
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

func TestPlan(t *testing.T) {
	light, mid, heavy := state.Light, state.Moderate, state.Heavy
	climb := state.Decision{Gear: mid, From: light, Changed: true, Reason: "load_per_cpu 1.2 >= 0.7"}
	shares := map[string]float64{"default": 0.1, "shop": 0.7, "wiki": 0.2}
	sites := func(gears ...state.Gear) []Site {
		var out []Site
		for i, name := range []string{"default", "shop", "wiki"} {
			out = append(out, Site{Name: name, Gear: gears[i]})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		sites []Site
		in    Input
		want  string // site>gear of each move, climbs marked with +
	}{
		{"the largest share climbs alone", sites(light, light, light), Input{Machine: climb, Shares: shares}, "+shop>moderate"},
		{"the next waits while one is in the gear", sites(light, mid, light), Input{Machine: state.Decision{Gear: mid}, Shares: shares}, ""},
		{"the next climbs when the distress presses", sites(light, mid, light), Input{Machine: state.Decision{Gear: mid}, Shares: shares, Pressing: true}, "+wiki>moderate"},
		{"shares unknown: every site climbs with the machine", sites(light, light, light), Input{Machine: climb}, "default>moderate shop>moderate wiki>moderate"},
		{"shares unknown, no climb: nothing moves", sites(light, light, light), Input{Machine: state.Decision{Gear: mid}}, ""},
		{"no site above the machine", sites(light, heavy, mid), Input{Machine: state.Decision{Gear: light, From: heavy, Changed: true}, Shares: shares}, "shop>light wiki>light"},
		// The site that comes down holds the gear: a neighbour with a
		// larger share does not climb on the way down.
		{"the way down climbs no neighbour", sites(light, light, heavy), Input{Machine: state.Decision{Gear: mid, From: heavy, Changed: true}, Shares: shares}, "wiki>moderate"},
		{"spread: every site in the machine's gear", sites(light, light, light), Input{Machine: state.Decision{Gear: heavy, Forced: true}, Spread: true, Shares: shares}, "default>heavy shop>heavy wiki>heavy"},
		{"a pinned site stays pinned and is passed over", []Site{{Name: "default"}, {Name: "shop", Pinned: true, Pin: light, PinReason: "pinned"}, {Name: "wiki"}},
			Input{Machine: climb, Shares: shares}, "shop>light +wiki>moderate"},
		{"no share: no climb", sites(light, light, light), Input{Machine: climb, Shares: map[string]float64{}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range Plan(tc.sites, tc.in) {
				s := m.Site + ">" + m.Gear.String()
				if m.Climb {
					s = "+" + s
					if !strings.HasPrefix(m.Reason, "site "+m.Site+": ") || m.Cause != state.CauseAuto {
						t.Errorf("climb's reason %q, cause %q", m.Reason, m.Cause)
					}
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("moves %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

package sensor

import (
	"fmt"
	"math"

	"github.com/prometheus/common/model"
)

// SiteLabel is the label whose value names the site a series of a
// Prometheus query's answer is for: a query such as
// max by (site) (gearshift_site_gear_level * on (instance, site) gearshift_site_forced)
// gives each site its own number, which moves that site alone.
const SiteLabel = "site"

// answer is one query's: one number for the server, or one per site.
type answer struct {
	value float64
	sites map[string]float64 // nil: the server's number
}

// apply writes the answer of the signal name into s.
func (a answer) apply(s *Sample, name string) {
	if a.sites == nil {
		s.Values[name] = a.value
		return
	}
	for site, v := range a.sites {
		s.SetSite(site, name, v)
	}
}

// bySite reads an answer whose series each carry a site label: one
// number per site; ok is false for any other answer (one number, read by
// oneNumber). A site given twice is an error; a series whose value is no
// number leaves its site out.
func bySite(val model.Value) (sites map[string]float64, ok bool, err error) {
	vec, isVec := val.(model.Vector)
	if !isVec || len(vec) == 0 {
		return nil, false, nil
	}
	for _, smp := range vec {
		if smp.Metric[SiteLabel] == "" {
			return nil, false, nil
		}
	}
	sites = make(map[string]float64, len(vec))
	for _, smp := range vec {
		site := string(smp.Metric[SiteLabel])
		if _, dup := sites[site]; dup {
			return nil, true, fmt.Errorf("site %s has more than one series, want one number per site (aggregate them: max by (site) (…))", site)
		}
		if f := float64(smp.Value); !math.IsNaN(f) && !math.IsInf(f, 0) {
			sites[site] = f
		}
	}
	return sites, true, nil
}

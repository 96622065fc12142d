package api

import (
	"fmt"
	"time"
)

// SiteStatus is one element of status sites (SPEC 15): a site of the
// config's sites, its gear and its share of the backend. Without a sites
// key the status lists DefaultSite alone, in the server's gear.
type SiteStatus struct {
	Name        string     `json:"name"`
	Hosts       []string   `json:"hosts"` // [] for the default site
	Gear        string     `json:"gear"`
	Mode        string     `json:"mode"` // "auto" or "forced": a pin of this site, or one of every site
	ForcedUntil *time.Time `json:"forced_until"`
	Since       time.Time  `json:"since"`
	Reason      string     `json:"reason"`
	// BackendRPS are the site's backend requests a second, and
	// BackendShare its share (0–1) of the server's, over the last minute;
	// nil while Varnish's counters cannot be read.
	BackendRPS     *float64 `json:"backend_rps"`
	BackendShare   *float64 `json:"backend_share"`
	MaxConnections int      `json:"max_connections"`
	// BackendRequests counts the site's backend requests read since the
	// daemon started (metrics only: gearshift_site_backend_requests_total).
	BackendRequests uint64 `json:"-"`
}

// Site returns the status of the site named name, false when there is none.
func (s *Status) Site(name string) (SiteStatus, bool) {
	for _, site := range s.Sites {
		if site.Name == name {
			return site, true
		}
	}
	return SiteStatus{}, false
}

// UnknownSiteError is the answer to a request naming a site the config
// does not have: 404 on the control socket, exit status 1 for the CLI.
type UnknownSiteError struct{ Site string }

func (e *UnknownSiteError) Error() string {
	return fmt.Sprintf("no site %q in the config (gearshift sites lists them)", e.Site)
}

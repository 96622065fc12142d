package api

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/numfmt"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// WriteSites writes sites as `gearshift sites` shows them: a table of one
// line per site, with a header. Times are shown in now's location.
func WriteSites(w io.Writer, sites []SiteStatus, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "SITE\tGEAR\tMODE\tSINCE\tBACKEND\tREASON\n")
	for _, s := range sites {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Gear, s.modeCell(now), s.sinceCell(now), s.shareCell(), oneLine(s.Reason))
	}
}

// writeSitesBlock writes the sites block of `gearshift status`, one row
// per site, into the status table; nothing when the default site is
// alone (a config without sites).
func (s *Status) writeSitesBlock(tw io.Writer, now time.Time) {
	if len(s.Sites) < 2 {
		return
	}
	for i, site := range s.Sites {
		label := ""
		if i == 0 {
			label = "sites"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\tsince %s\t%s\t%s\n", label, site.Name, site.Gear, site.modeCell(now),
			site.sinceCell(now), site.shareCell()+" of backend", oneLine(site.Reason))
	}
}

// WriteText writes the site as `gearshift status --site NAME` shows it.
// Times are shown in now's location.
func (s *SiteStatus) WriteText(w io.Writer, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	hosts := strings.Join(s.Hosts, ", ")
	if s.Name == config.DefaultSite {
		hosts = "every host no other site claims"
	}
	fmt.Fprintf(tw, "site\t%s (%s)\n", s.Name, oneLine(hosts))
	gear := strings.ToUpper(s.Gear)
	release := "`gearshift auto --site " + s.Name + "`"
	switch {
	case s.Mode == "forced" && s.ForcedUntil != nil:
		gear += fmt.Sprintf("   forced by operator until %s (%s left; %s releases it)",
			timefmt.Clock(s.ForcedUntil.In(now.Location()), now, true), timefmt.Coarse(s.ForcedUntil.Sub(now)), release)
	case s.Mode == "forced":
		gear += "   forced by operator until " + release
	default:
		gear += "   auto"
	}
	fmt.Fprintf(tw, "gear\t%s\n", gear)
	fmt.Fprintf(tw, "since\t%s (%s ago)\n", s.Since.In(now.Location()).Format(timefmt.Stamp), timefmt.Coarse(now.Sub(s.Since)))
	fmt.Fprintf(tw, "why\t%s\n", oneLine(s.Reason))
	backend := "requests unknown (Varnish's counters cannot be read)"
	if s.BackendShare != nil && s.BackendRPS != nil {
		backend = fmt.Sprintf("%s of the server's backend requests, %s a second, over the last minute",
			s.shareCell(), numfmt.Trim(*s.BackendRPS, 1))
	}
	if s.MaxConnections > 0 {
		backend += fmt.Sprintf("; at most %d connections", s.MaxConnections)
	}
	fmt.Fprintf(tw, "backend\t%s\n", backend)
}

// WriteSiteApplied writes the gear of site after a force or auto of it,
// and each target's profile, and returns the targets that did not follow.
func (s *Status) WriteSiteApplied(w io.Writer, name string) (notInSync []string) {
	site, ok := s.Site(name)
	switch {
	case !ok:
		fmt.Fprintf(w, "site %s: not in the daemon's status\n", name)
	case site.Mode == "forced" && site.ForcedUntil != nil:
		fmt.Fprintf(w, "site %s: gear %s, forced until %s\n", name, site.Gear, site.ForcedUntil.Local().Format(timefmt.Stamp))
	case site.Mode == "forced":
		fmt.Fprintf(w, "site %s: gear %s, forced until `gearshift auto --site %s`\n", name, site.Gear, name)
	default:
		fmt.Fprintf(w, "site %s: gear %s, auto: %s\n", name, site.Gear, site.Reason)
	}
	return s.writeTargetsApplied(w)
}

// modeCell is the site's mode for a table: "auto", "forced until 16:20",
// "forced until auto".
func (s *SiteStatus) modeCell(now time.Time) string {
	switch {
	case s.Mode == "forced" && s.ForcedUntil != nil:
		return "forced until " + timefmt.Clock(s.ForcedUntil.In(now.Location()), now, false)
	case s.Mode == "forced":
		return "forced until auto"
	}
	return s.Mode
}

// sinceCell is when the site reached its gear: "14:51 (1h00m ago)".
func (s *SiteStatus) sinceCell(now time.Time) string {
	return timefmt.Clock(s.Since.In(now.Location()), now, false) + " (" + timefmt.Coarse(now.Sub(s.Since)) + " ago)"
}

// shareCell is the site's share of the backend's requests, "71%", or "-"
// while Varnish's counters cannot be read.
func (s *SiteStatus) shareCell() string {
	if s.BackendShare == nil {
		return "-"
	}
	return numfmt.Trim(100**s.BackendShare, 1) + "%"
}

package sensor

// The pools of sensor.phpfpm.pools that sites name as their phpfpm_pool:
// read with the others, their figures are their site's alone.

// ForSites gives each pool named in sitePools (pool name → site name) to
// its site: its figures go to Sample.Sites, out of the server's sums. A
// name no pool has is left alone (config check refuses it).
func (r *PHPFPM) ForSites(sitePools map[string]string) {
	for _, p := range r.pools {
		if p.name != "" {
			p.site = sitePools[p.name]
		}
	}
}

// serverPools tells whether any pool is the server's: with none, the
// server's phpfpm signals are unknown rather than zero.
func (r *PHPFPM) serverPools() bool {
	for _, p := range r.pools {
		if p.site == "" {
			return true
		}
	}
	return false
}

// applySites writes the figures of each site's pool that could be read
// into s.Sites, under the site's name; a figure its pool could not give is
// missing, as the server's would be.
func (r *PHPFPM) applySites(s *Sample, readings []fpmReading, errs []error) {
	for i, p := range r.pools {
		if p.site == "" || errs[i] != nil {
			continue
		}
		g := readings[i]
		if g.queueErr == nil {
			s.SetSite(p.site, PHPFPMQueue, g.queue)
		}
		if g.busyErr == nil {
			s.SetSite(p.site, PHPFPMBusyRatio, g.busy)
		}
		if g.reachedOK {
			s.SetSite(p.site, PHPFPMMaxChildrenReached, g.reached)
		}
	}
}

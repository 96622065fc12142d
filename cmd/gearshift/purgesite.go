package main

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/offline/ban"
)

// siteNamed returns the config's site named name; a site the config does
// not have is an *api.UnknownSiteError (exit 1, as the daemon's 404).
func siteNamed(cfg *config.Config, name string) (config.Site, error) {
	for _, s := range cfg.SiteList(0) {
		if s.Name == name {
			return s, nil
		}
	}
	return config.Site{}, &api.UnknownSiteError{Site: name}
}

// purgeURL returns the ban words that purge rawURL with the profiles of
// the site that owns its host. With site set, a URL of another site's is
// a usage error.
func purgeURL(cfg *config.Config, site, rawURL string) ([]string, int, error) {
	if site != "" {
		if _, err := siteNamed(cfg, site); err != nil {
			return nil, exitFailure, err
		}
	}
	if _, err := ban.Purge(rawURL, &cfg.Profiles); err != nil {
		return nil, exitUsage, err
	}
	u, _ := url.Parse(rawURL) // ban.Purge took it
	owner := cfg.SiteOf(u.Host)
	if site != "" && owner != site {
		return nil, exitUsage, fmt.Errorf("%s is a page of site %s, not of %s: purge it with --site %s, or without --site", rawURL, owner, site, owner)
	}
	s, err := siteNamed(cfg, owner)
	if err != nil {
		return nil, exitFailure, err
	}
	p := cfg.SiteOptions(s)
	words, err := ban.Purge(rawURL, &p)
	if err != nil {
		return nil, exitUsage, err
	}
	return words, exitOK, nil
}

// scopeToSite returns the ban words keeping words to the pages of site's
// hosts: words themselves without site, or when the site has every host.
func scopeToSite(cfg *config.Config, site string, words []string) ([]string, int, error) {
	if site == "" {
		return words, exitOK, nil
	}
	if _, err := siteNamed(cfg, site); err != nil {
		return nil, exitFailure, err
	}
	cond := siteHostCondition(cfg, site)
	if cond == nil {
		return words, exitOK, nil
	}
	return append(append(append([]string(nil), words...), "&&"), cond...), exitOK, nil
}

// siteHostCondition returns the ban condition that holds for the pages of
// site: obj.http.X-Gs-Host, the Host as the profiles keep it with a page
// (lower-cased, without its port and "www." under profiles.normalize_host;
// as sent without it), matched against the site's hosts, or for the
// default site against none of every other site's. nil when site has
// every host. Under normalize_host, www.NAME and NAME are one page in the
// cache: a site that claims either reaches it, the default site never.
func siteHostCondition(cfg *config.Config, site string) []string {
	if site != config.DefaultSite {
		return []string{"obj.http.X-Gs-Host", "~", hostKeysRE(siteHostKeys(cfg, site))}
	}
	var others []string
	for _, s := range cfg.SiteList(0) {
		if s.Name != config.DefaultSite {
			others = append(others, siteHostKeys(cfg, s.Name)...)
		}
	}
	if len(others) == 0 {
		return nil
	}
	return []string{"obj.http.X-Gs-Host", "!~", hostKeysRE(others)}
}

// siteHostKeys returns regular expressions of the X-Gs-Host values of the
// pages of site (not the default site): each host name, and each glob's
// names.
func siteHostKeys(cfg *config.Config, site string) []string {
	s, _ := siteNamed(cfg, site)
	normalize := cfg.SiteOptions(s).NormalizeHost
	var keys []string
	seen := map[string]bool{}
	add := func(re string) {
		if !seen[re] {
			seen[re] = true
			keys = append(keys, re)
		}
	}
	for _, h := range s.Hosts {
		h = strings.ToLower(h)
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			// As the router reads a glob: one label or more before suffix.
			add(`[^.]+(\.[^.]+)*\.` + regexp.QuoteMeta(suffix))
			if normalize && cfg.SiteOf("www."+suffix) == site {
				add(regexp.QuoteMeta(suffix))
			}
			continue
		}
		if normalize {
			h = strings.TrimPrefix(h, "www.")
		}
		add(regexp.QuoteMeta(h))
	}
	return keys
}

// hostKeysRE is one ban argument matching a Host that is one of keys,
// in any case and with any port (a Host kept as sent has them).
func hostKeysRE(keys []string) string {
	return `(?i)^(` + strings.Join(keys, "|") + `)(:[0-9]+)?$`
}

package top

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/profiles"
)

// TestDoorsCountTheLastMinute: records read from varnishlog are counted
// by door for a minute; a word that is no door, and an older second, are
// not; nothing is given while the log is not read.
func TestDoorsCountTheLastMinute(t *testing.T) {
	var d Doors
	now := time.Unix(1_000_000, 0)
	if _, ok := d.Stats(now); ok {
		t.Fatal("Stats before the log is read: ok, want none")
	}
	d.Reading(now)
	raw := "    32770 VCL_Log        c gearshift-door: proxy_protocol\n" +
		"    32771 VCL_Log        c gearshift-door: unidentified\n" +
		"    32772 VCL_Log        c gearshift-door: unidentified\n" +
		"    32773 VCL_Log        c gearshift-door: backdoor\n" +
		"    32774 VCL_Log        c gearshift-reason: miss\n" +
		"    32775 VCL_Log        b gearshift-fetch: shop\n" +
		"    32776 VCL_Log        b gearshift-fetch: shop\n" +
		"    32777 VCL_Log        b gearshift-fetch: default\n" +
		"    32778 VCL_Log        b gearshift-fetch: \n"
	if err := parseDoors(strings.NewReader(raw), func(r doorRecord) {
		if r.site != "" {
			d.AddFetch(now, r.site)
		} else {
			d.Add(now, r.door)
		}
	}); err != nil {
		t.Fatal(err)
	}
	d.Add(now.Add(-61*time.Second), profiles.DoorDirect)
	d.Add(now.Add(-30*time.Second), profiles.DoorForwarded)
	counts, ok := d.Stats(now)
	if want := [len(profiles.Doors)]int{0, 1, 1, 2}; !ok || counts != want {
		t.Errorf("Stats = %v %v, want %v (direct, proxy_protocol, forwarded, unidentified)", counts, ok, want)
	}
	d.AddFetch(now.Add(-61*time.Second), "shop")
	if fetches, ok := d.Fetches(now); !ok || len(fetches) != 2 || fetches["shop"] != 2 || fetches["default"] != 1 {
		t.Errorf("Fetches = %v %v, want shop 2, default 1", fetches, ok)
	}
	if n := d.FetchTotal("shop"); n != 3 {
		t.Errorf("FetchTotal(shop) = %d, want 3 (the older one too)", n)
	}
	for i := range maxFetchSites + 10 {
		d.AddFetch(now, fmt.Sprint("site-", i))
	}
	if fetches, _ := d.Fetches(now); len(fetches) != maxFetchSites {
		t.Errorf("a second's bucket counts %d sites, want at most %d", len(fetches), maxFetchSites)
	}
	if counts, _ := d.Stats(now.Add(time.Minute)); counts != [len(profiles.Doors)]int{} {
		t.Errorf("a minute later: %v, want nothing", counts)
	}
	d.Stopped()
	if _, ok := d.Stats(now); ok {
		t.Error("Stats after the reader stopped: ok, want none")
	}
}

// TestDoorsDemandIn: the backend requests of every site and the
// refusals in a span of whole seconds, its end excluded; none while the
// log is not read.
func TestDoorsDemandIn(t *testing.T) {
	var d Doors
	now := time.Unix(1_000_000, 0)
	if _, ok := d.DemandIn(now.Add(-10*time.Second), now); ok {
		t.Fatal("DemandIn before the log is read: ok, want none")
	}
	d.Reading(now)
	for s, n := range map[int]int{-12: 5, -10: 3, -1: 2, 0: 7} {
		for range n {
			d.AddFetch(now.Add(time.Duration(s)*time.Second), fmt.Sprint("site-", s%2))
		}
	}
	for range 4 {
		d.AddRefused(now.Add(-time.Second), "site-1")
	}
	d.AddRefused(now.Add(-time.Second), "")
	for _, c := range []struct {
		from, to time.Duration
		want     int
	}{
		{-10 * time.Second, 0, 10},                // -10 and -1, with -1's refusals; not now's second
		{-20 * time.Second, -10 * time.Second, 5}, // -12 only
		{-10 * time.Second, time.Second, 17},      // now's second too
		{0, 0, 0},
	} {
		if n, ok := d.DemandIn(now.Add(c.from), now.Add(c.to)); !ok || n != c.want {
			t.Errorf("DemandIn(%s, %s) = %d %v, want %d", c.from, c.to, n, ok, c.want)
		}
	}
	// By site: the refusals that named one count for it; the one that
	// named none is no site's.
	if by, ok := d.SiteDemandIn(now.Add(-10*time.Second), now); !ok || by["site-0"] != 3 || by["site--1"] != 2 || by["site-1"] != 4 || len(by) != 3 {
		t.Errorf("SiteDemandIn = %v %v, want site-0 3 and site--1 2 (fetches), site-1 4 (refusals)", by, ok)
	}
}

// TestDoorsRefusals: Varnish's busy FetchError of the site's backend and
// the sites' backend_full refusals are counted and told on Rush; the
// guest, probe and spare backends' are not, nor other errors; Refused gives them
// per second of the window.
func TestDoorsRefusals(t *testing.T) {
	raw := "    32770 FetchError     b backend default: busy\n" +
		"    32771 FetchError     b backend gearshift_copies: busy\n" +
		"    32772 FetchError     b backend gearshift_guest: busy\n" +
		"    32773 FetchError     b backend gearshift_probe: busy\n" +
		"    32773 FetchError     b backend gearshift_spare: busy\n" +
		"    32774 FetchError     b backend default: fail errno 111 (Connection refused)\n" +
		"    32775 VCL_Log        c gearshift-reason: backend_full site=shop max_connections=4\n" +
		"    32776 VCL_Log        c gearshift-reason: miss\n" +
		"    32777 VCL_Log        c gearshift-door: direct\n"
	var refused, other int
	var sites []string
	if err := parseDoors(strings.NewReader(raw), func(r doorRecord) {
		if r.refused {
			refused++
			if r.site != "" {
				sites = append(sites, r.site)
			}
		} else {
			other++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if refused != 3 || other != 1 {
		t.Errorf("refusals %d, other records %d: want 3 (default, gearshift_copies, backend_full) and 1 (the door)", refused, other)
	}
	if len(sites) != 1 || sites[0] != "shop" {
		t.Errorf("refusals naming their site: %q, want the backend_full record's shop", sites)
	}

	var d Doors
	now := time.Unix(1_000_000, 0)
	if _, ok := d.Refused(now, 10*time.Second); ok {
		t.Fatal("Refused before the log is read: ok, want none")
	}
	d.Reading(now)
	select {
	case <-d.Rush():
		t.Fatal("Rush told before any refusal")
	default:
	}
	for s, n := range map[int]int{-12: 50, -9: 10, 0: 10} {
		for range n {
			d.AddRefused(now.Add(time.Duration(s)*time.Second), "")
		}
	}
	select {
	case <-d.Rush():
	default:
		t.Fatal("refusals counted, Rush told nothing")
	}
	if v, ok := d.Refused(now, 10*time.Second); !ok || v != 2 {
		t.Errorf("Refused over 10s = %v %v, want 2 (20 refusals; not the ones 12 s ago)", v, ok)
	}
	if v, _ := d.Refused(now, 0); v != 10 {
		t.Errorf("Refused over no window = %v, want this second's 10", v)
	}
}

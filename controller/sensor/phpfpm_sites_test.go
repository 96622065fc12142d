package sensor

import (
	"context"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/timefmt"
)

// readSites reads r once and returns the server's figures and the sites'.
func readSites(tb testing.TB, r *PHPFPM) (map[string]float64, map[string]map[string]float64) {
	tb.Helper()
	apply, err := r.Read(context.Background())
	if err != nil {
		tb.Fatalf("Read: %v", err)
	}
	s := Sample{Values: map[string]float64{}}
	if apply != nil {
		apply(&s)
	}
	return s.Values, s.Sites
}

// A pool a site names is read for that site alone: its queue and busy
// ratio are the site's, and the server's signals are the other pools'
// (none at all when every pool is a site's), on a real php-fpm.
func TestPHPFPMSitePools(t *testing.T) {
	f := startPHPFPM(t)
	cfg := PHPFPMConfig{Path: "/status", Timeout: timefmt.Duration(2 * time.Second), Pools: []PHPFPMPool{
		{Name: "unixpool", Socket: f.unixStatus, Listen: f.unixListen},
		{Name: "tcppool", Socket: f.tcpStatus, MaxChildren: 1},
	}}
	open := func(sitePools map[string]string) *PHPFPM {
		r, err := NewPHPFPM(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.ForSites(sitePools)
		return r
	}
	shops := open(map[string]string{"unixpool": "shop"})
	all := open(map[string]string{"unixpool": "shop", "tcppool": "blog"})

	// The shop's one child busy and three requests waiting for it.
	wait := occupy(t, "unix", f.unixListen, f.slow, 4, 2*time.Second)
	defer wait()
	var server map[string]float64
	var sites map[string]map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		server, sites = readSites(t, shops)
		if sites["shop"][PHPFPMQueue] == 3 && sites["shop"][PHPFPMBusyRatio] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shop's pool: %v, want a queue of 3 and every child busy", sites)
		}
	}
	if q, ok := server[PHPFPMQueue]; !ok || q != 0 || server[PHPFPMBusyRatio] != 0 {
		t.Errorf("the server's figures %v, want the idle tcppool's alone (queue 0, busy 0)", server)
	}
	if len(sites) != 1 {
		t.Errorf("sites %v, want the shop alone", sites)
	}

	server, sites = readSites(t, all)
	for _, name := range []string{PHPFPMQueue, PHPFPMBusyRatio, PHPFPMMaxChildrenReached} {
		if v, ok := server[name]; ok {
			t.Errorf("every pool a site's, yet the server's %s = %v", name, v)
		}
	}
	if sites["shop"][PHPFPMQueue] != 3 || sites["blog"][PHPFPMQueue] != 0 || sites["blog"][PHPFPMBusyRatio] != 0 {
		t.Errorf("sites %v, want the shop queueing and the blog idle", sites)
	}
}

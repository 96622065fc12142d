package system

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// pollWindow is how long BenchmarkSitesPoll counts the daemons' CPU: two
// minutes of polls a second, so that /proc's 10 ms ticks are a few per
// cent of what a daemon uses.
const pollWindow = 2 * time.Minute

// BenchmarkSitesPoll runs three daemons side by side, each `gearshift
// run` with the default config on a varnishd of its own: one without a
// sites key (0.4), one with a site, one with 300 (each an exact name and
// a glob). Once every one is in sync it counts, over the same two
// minutes, the CPU each daemon process and its children (the Varnish log
// follower) take: the daemon's CPU per poll, at the default poll
// interval, and its ratio at 300 sites to one site's.
func BenchmarkSitesPoll(b *testing.B) {
	for range b.N {
		hosts := []struct {
			name  string
			sites int
		}{{"nosites", 0}, {"1", 1}, {"300", 300}}
		daemons := make([]*runningDaemon, len(hosts))
		var wg sync.WaitGroup
		for i, h := range hosts {
			v := varnishtest.Start(b, varnishtest.Config{})
			path, cfg := configtest.ForVarnish(b, v, func(cfg *config.Config) {
				cfg.Backend = profiles.BackendAt("127.0.0.1", 9) // never asked: no traffic
				cfg.PollInterval = config.Default().PollInterval
				cfg.Log.Level = "info"
				for s := range h.sites {
					cfg.Sites = append(cfg.Sites, config.Site{Name: fmt.Sprintf("site-%d", s),
						Hosts: []string{fmt.Sprintf("site%d.example", s), fmt.Sprintf("*.site%d.example", s)}})
				}
			})
			d := spawnDaemon(b, v, path, "NOTIFY_SOCKET=")
			d.cfg = cfg
			daemons[i] = d
			b.Cleanup(func() {
				if d.running() {
					d.cmd.Process.Kill()
					<-d.exited
				}
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.eventually(h.name+" in sync", 3*time.Minute, func() error {
					s, err := d.status()
					if err != nil {
						return err
					}
					if len(s.Sites) != h.sites+1 { // and default
						return fmt.Errorf("%d sites in status, want %d and default", len(s.Sites), h.sites)
					}
					for _, t := range s.Targets {
						if !t.InSync {
							return fmt.Errorf("target %s not in sync", t.Admin)
						}
					}
					return nil
				})
			}()
		}
		wg.Wait()
		time.Sleep(15 * time.Second) // past a first look at the VCLs whole
		before := make([]treeCPU, len(daemons))
		for i, d := range daemons {
			before[i] = processTreeCPU(b, d.cmd.Process.Pid)
		}
		time.Sleep(pollWindow)
		polls := float64(pollWindow / time.Duration(config.Default().PollInterval))
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / polls }
		all, own := map[string]float64{}, map[string]float64{}
		for i, d := range daemons {
			used := processTreeCPU(b, d.cmd.Process.Pid).sub(before[i])
			name := hosts[i].name
			all[name], own[name] = ms(used.all()), ms(used.own)
			b.ReportMetric(all[name], "cpu-per-poll-"+name+"-ms")
			b.ReportMetric(own[name], "own-cpu-per-poll-"+name+"-ms")
			b.ReportMetric(ms(used.children), "children-cpu-per-poll-"+name+"-ms")
			b.ReportMetric(ms(used.reaped), "reaped-cpu-per-poll-"+name+"-ms")
		}
		b.ReportMetric(all["300"]/all["1"], "cpu-per-poll-300-vs-1")
		b.ReportMetric(all["300"]/all["nosites"], "cpu-per-poll-300-vs-nosites")
		b.ReportMetric(own["300"]/own["1"], "own-cpu-per-poll-300-vs-1")
	}
}

// treeCPU is the CPU time a daemon used: its own process's, its running
// children's (the Varnish log follower), and what the children it reaped
// used (varnishstat and the other commands it runs).
type treeCPU struct{ own, children, reaped time.Duration }

func (c treeCPU) all() time.Duration { return c.own + c.children + c.reaped }

func (c treeCPU) sub(o treeCPU) treeCPU {
	return treeCPU{c.own - o.own, c.children - o.children, c.reaped - o.reaped}
}

// processTreeCPU is the CPU time pid and its children have used so far.
func processTreeCPU(tb testing.TB, pid int) treeCPU {
	tb.Helper()
	var c treeCPU
	found := false
	eachProcess(func(p, _, ppid int, own, reaped time.Duration) {
		switch {
		case p == pid:
			c.own, c.reaped, found = c.own+own, c.reaped+reaped, true
		case ppid == pid:
			c.children, c.reaped = c.children+own, c.reaped+reaped
		}
	})
	if !found {
		tb.Fatalf("no CPU time read for process %d", pid)
	}
	return c
}

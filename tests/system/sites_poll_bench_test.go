package system

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
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
		for i, h := range hosts {
			v := varnishtest.Start(b, varnishtest.Config{})
			path, cfg := configtest.ForVarnish(b, v, func(cfg *config.Config) {
				cfg.Varnish.Targets[0].Name = v.WorkDir          // its counters and its log
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
		}
		// The daemons started together: each is waited for in turn.
		for i, h := range hosts {
			d := daemons[i]
			d.eventually(h.name+" in sync", 3*time.Minute, func() error {
				s, err := d.status()
				if err != nil {
					return err
				}
				if len(s.Sites) != h.sites+1 { // and default
					return fmt.Errorf("%d sites in status, want %d and default", len(s.Sites), h.sites)
				}
				// Every poll reads the daemon's own varnishd: its
				// counters, and its log (the sites' requests).
				if s.Sample == nil {
					return errors.New("no sample yet")
				}
				if _, ok := s.Sample.Signal(state.ClientRPS); !ok {
					return fmt.Errorf("client_rps unread: %+v", s.Sample)
				}
				if s.FrontDoor == nil || h.sites > 0 && s.Sites[0].BackendRPS == nil {
					return errors.New("the Varnish log unread")
				}
				for _, t := range s.Targets {
					if !t.InSync {
						return fmt.Errorf("target %s not in sync", t.Admin)
					}
				}
				return nil
			})
		}
		time.Sleep(15 * time.Second) // past a first look at the VCLs whole
		before := make([]treeCPU, len(daemons))
		firstPoll := make([]time.Time, len(daemons))
		for i, d := range daemons {
			before[i] = processTreeCPU(b, d.cmd.Process.Pid)
			firstPoll[i] = lastPoll(b, d)
		}
		time.Sleep(pollWindow)
		all, own := map[string]float64{}, map[string]float64{}
		for i, d := range daemons {
			used := processTreeCPU(b, d.cmd.Process.Pid).sub(before[i])
			// The polls made over the window, by the samples' clock.
			polls := lastPoll(b, d).Sub(firstPoll[i]).Seconds() / time.Duration(config.Default().PollInterval).Seconds()
			if polls < pollWindow.Seconds()*0.9 {
				b.Fatalf("%s: %.0f polls in %s", hosts[i].name, polls, pollWindow)
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / polls }
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

// lastPoll is the time of d's last sample.
func lastPoll(tb testing.TB, d *runningDaemon) time.Time {
	tb.Helper()
	s, err := d.status()
	if err != nil || s.Sample == nil {
		tb.Fatalf("status: %v", err)
	}
	return s.Sample.Time
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

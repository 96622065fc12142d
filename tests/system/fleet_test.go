package system

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
	"github.com/gearshift/gearshift/internal/testsupport/promtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// The fleet recipe's queries (docs/operating.md, "A fleet").
const (
	dbThreadsQuery = "max(mysql_global_status_threads_running)"
	fleetGearQuery = "max(gearshift_gear_level * gearshift_forced)"
)

// TestFleet runs three web nodes (a varnishd and a gearshift each) in
// front of one Apache, a private MariaDB they share, Debian's
// prometheus-mysqld-exporter, and Debian's prometheus scraping the
// exporter and the three daemons' metrics, and checks the fleet recipe:
// (a) a database surge brings every node to heavy while their CPUs have
// nothing to do, (b) forcing one node to heavy brings the others, and
// releasing it brings the fleet down together, (c) with Prometheus gone
// the signals are unavailable, the nodes keep to their local rules and
// nothing crashes, and (d) a ban reaches all three.
// fleet is n web nodes in front of one Apache, sharing a MariaDB whose
// exporter and the nodes' metrics a private Prometheus scrapes.
type fleet struct {
	db        *lampstack.MariaDB
	prom      *promtest.Server
	nodes     []*runningDaemon
	varnishes []*varnishtest.Varnish
}

// startFleet starts the fleet: nodes with the recipe's rules (heavy on the
// database's threads and on a forced gear), and local nodes with their
// machine's signals alone (the default rules). Every node steps down
// after 2s, not 2m.
func startFleet(tb testing.TB, nodes, local int) *fleet {
	tb.Helper()
	bin := lampstack.Need(tb, "mariadb-server, prometheus-mysqld-exporter, apache2",
		append(lampstack.MariaDBPrograms, "prometheus-mysqld-exporter", "apache2")...)
	varnishtest.Binary(tb)
	dir := tb.TempDir()
	lampstack.Searchable(tb, dir)
	f := &fleet{}

	f.db = lampstack.StartMariaDB(tb, dir, bin)
	if _, err := f.db.Query("CREATE USER 'exporter'@'localhost' IDENTIFIED BY 'exporter-pw'; GRANT PROCESS, REPLICATION CLIENT, SELECT ON *.* TO 'exporter'@'localhost'"); err != nil {
		tb.Fatal(err)
	}
	exporterAddr := testenv.FreeAddr(tb)
	exp := exec.Command(bin["prometheus-mysqld-exporter"], "--web.listen-address="+exporterAddr, "--no-collect.slave_status")
	exp.Env = []string{"DATA_SOURCE_NAME=exporter:exporter-pw@unix(" + f.db.Socket + ")/"}
	var expOut lockedBuffer
	exp.Stdout, exp.Stderr = &expOut, &expOut
	testenv.DiesWithTest(exp)
	if err := exp.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		exp.Process.Kill()
		exp.Wait()
		if tb.Failed() {
			tb.Logf("exporter output:\n%s", expOut.String())
		}
	})

	root := filepath.Join(dir, "www")
	lampstack.WriteFile(tb, filepath.Join(root, "index.html"), "fleet page\n")
	apachePort := lampstack.FreePort(tb)
	lampstack.StartApache(tb, lampstack.Apache{Dir: filepath.Join(dir, "apache"), Root: root, Port: apachePort, Probe: "/index.html"}, bin)

	metrics := make([]string, nodes)
	for i := range nodes + local {
		f.varnishes = append(f.varnishes, varnishtest.Start(tb, varnishtest.Config{}))
		if i < nodes {
			metrics[i] = testenv.FreeAddr(tb)
		}
	}
	f.prom = promtest.StartJobs(tb, map[string][]string{"gearshift": metrics, "mysql": {exporterAddr}})
	for i, v := range f.varnishes {
		path, cfg := configtest.ForVarnish(tb, v, func(cfg *config.Config) {
			cfg.Backend = profiles.BackendAt("127.0.0.1", apachePort)
			// The default poll: four daemons polling ten times a second,
			// and their queries, would load the machine they share.
			cfg.PollInterval = timefmt.Duration(time.Second)
			cfg.Hysteresis.MinDwell = timefmt.Duration(time.Second)
			cfg.Hysteresis.DownWindow = timefmt.Duration(2 * time.Second)
			if i >= nodes {
				return
			}
			quietThresholds(cfg) // the nodes' CPUs never shift them here
			cfg.MetricsListen = metrics[i]
			cfg.Sensor.Prometheus = sensorPrometheus(f.prom.URL)
			cfg.States.Heavy.Enter["db_threads_running"] = 20
			cfg.States.Heavy.Stay["db_threads_running"] = 10
			cfg.States.Heavy.Enter["fleet_gear"] = 2
			cfg.States.Heavy.Stay["fleet_gear"] = 2
		})
		d := spawnDaemon(tb, v, path)
		d.cfg = cfg
		f.nodes = append(f.nodes, d)
		tb.Cleanup(func() {
			if d.running() {
				d.cmd.Process.Kill()
				<-d.exited
			}
			if tb.Failed() {
				tb.Logf("node %d output:\n%s", i, d.out)
			}
		})
	}
	return f
}

// every waits until cond holds for each of nodes.
func every(tb testing.TB, nodes []*runningDaemon, what string, timeout time.Duration, cond func(*api.Status) error) {
	tb.Helper()
	for i, d := range nodes {
		d.eventually(fmt.Sprintf("node %d: %s", i, what), timeout, func() error {
			s, err := d.status()
			if err != nil {
				return err
			}
			return cond(s)
		})
	}
}

// surge holds the database busy: conns connections each sleeping in it for
// d (see lampstack.MariaDB.Sleep). The returned wait ends with them.
func (f *fleet) surge(tb testing.TB, conns int, d time.Duration) (wait func()) {
	done := f.db.Sleep(conns, d)
	return sync.OnceFunc(func() {
		if err := done(); err != nil {
			tb.Error(err)
		}
	})
}

func TestFleet(t *testing.T) {
	const n = 3
	f := startFleet(t, n, 0)
	nodes, varnishes, prom := f.nodes, f.varnishes, f.prom
	every := func(what string, timeout time.Duration, cond func(*api.Status) error) {
		t.Helper()
		every(t, nodes, what, timeout, cond)
	}

	every("light, in sync, with both fleet signals", 90*time.Second, func(s *api.Status) error {
		if err := inSync(s, "light"); err != nil {
			return err
		}
		for _, name := range []string{"db_threads_running", "fleet_gear"} {
			if _, ok := s.Sample.Signal(name); !ok {
				return fmt.Errorf("%s unavailable", name)
			}
		}
		return nil
	})

	t.Run("database surge", func(t *testing.T) {
		// Forty connections each sleeping in the database: threads
		// running, no CPU used.
		start := time.Now()
		wait := f.surge(t, 40, 12*time.Second)
		defer wait()
		every("heavy on the database's threads", 30*time.Second, func(s *api.Status) error {
			if err := inSync(s, "heavy"); err != nil {
				return err
			}
			if !strings.Contains(s.Reason, "db_threads_running") {
				return fmt.Errorf("heavy for %q, want the database's threads", s.Reason)
			}
			if v, _ := s.Sample.Signal("load_per_cpu"); v >= 1000 {
				return fmt.Errorf("load_per_cpu %g", v)
			}
			return nil
		})
		t.Logf("every node in heavy %.1fs after the database surge began", time.Since(start).Seconds())
		wait()
		every("back in light once the surge is over", 60*time.Second, func(s *api.Status) error { return inSync(s, "light") })
	})

	t.Run("one node forced, the fleet follows", func(t *testing.T) {
		if out, errOut, code := nodes[0].gs("force", "heavy"); code != exitOK {
			t.Fatalf("force: exit %d\n%s%s", code, out, errOut)
		}
		every("heavy, following the forced node", 30*time.Second, func(s *api.Status) error { return inSync(s, "heavy") })
		for _, d := range nodes[1:] {
			if s, _ := d.status(); s == nil || s.Mode != "auto" || !strings.Contains(s.Reason, "fleet_gear") {
				t.Errorf("a follower is %+v, want auto on fleet_gear", s)
			}
		}
		if out, errOut, code := nodes[0].gs("auto"); code != exitOK {
			t.Fatalf("auto: exit %d\n%s%s", code, out, errOut)
		}
		every("the fleet down together", 60*time.Second, func(s *api.Status) error { return inSync(s, "light") })
	})

	t.Run("ban reaches every node", func(t *testing.T) {
		fleet := fleetConfig(t, varnishes[:])
		// Each ban is looked for at once: Varnish drops a ban that a newer
		// one makes redundant (an empty cache has nothing older to test).
		for _, tc := range []struct{ args, want string }{
			{"ban\x00req.url ~ ^/news/", "req.url ~ ^/news/"},
			{"purge\x00http://WWW.Example.com:8080/today?x=1", "obj.http.X-Gs-Host == example.com && obj.http.X-Gs-Url == /today?x=1"},
			{"purge\x00--tag\x00product-42\x00--tag\x00cat.7", "obj.http.xkey ~ (^|[[:space:],])(product-42|cat\\.7)([[:space:],]|$)"},
		} {
			args := append([]string{"--config", fleet}, strings.Split(tc.args, "\x00")...)
			out, errOut, code := runGearshift(t, args...)
			if code != exitOK || strings.Count(out, ": banned\n") != n {
				t.Fatalf("%s: exit %d\n%s%s", tc.args, code, out, errOut)
			}
			for i, v := range varnishes {
				if list := banList(t, v); !strings.Contains(list, tc.want) {
					t.Errorf("node %d's ban.list lacks %q:\n%s", i, tc.want, list)
				}
			}
		}
		out, _, code := runGearshift(t, "--config", fleet, "ban", "req.nonsense == 1")
		if code != exitFailure || strings.Count(out, ": REFUSED: ") != n {
			t.Errorf("a ban Varnish refuses: exit %d\n%s", code, out)
		}
		if _, errOut, code := runGearshift(t, "--config", fleet, "ban", "req.url"); code != exitUsage || !strings.Contains(errOut, "is incomplete") {
			t.Errorf("an incomplete ban: exit %d, %q", code, errOut)
		}
	})

	t.Run("Prometheus gone", func(t *testing.T) {
		prom.Stop()
		every("local rules alone, signals unavailable", 30*time.Second, func(s *api.Status) error {
			if err := inSync(s, "light"); err != nil {
				return err
			}
			for _, name := range []string{"db_threads_running", "fleet_gear"} {
				if v, ok := s.Sample.Signal(name); ok {
					return fmt.Errorf("%s still %g", name, v)
				}
			}
			return nil
		})
		for i, d := range nodes {
			if out, _, code := d.gs("check"); code != exitOK || !strings.HasPrefix(out, "GEARSHIFT OK") {
				t.Errorf("node %d: check exit %d: %s", i, code, out)
			}
			if !strings.Contains(d.out.String(), "prometheus db_threads_running") {
				t.Errorf("node %d's log does not say the query fails", i)
			}
		}
	})
}

// sensorPrometheus is the fleet recipe's sensor block.
func sensorPrometheus(url string) (p sensor.PrometheusConfig) {
	p = config.Default().Sensor.Prometheus
	p.URL = url
	p.Signals = map[string]string{"db_threads_running": dbThreadsQuery, "fleet_gear": fleetGearQuery}
	return p
}

// fleetConfig writes a config whose targets are every node's Varnish: the
// CLI's view of the fleet.
func fleetConfig(t *testing.T, vs []*varnishtest.Varnish) string {
	t.Helper()
	path, _ := configtest.ForVarnish(t, vs[0], func(cfg *config.Config) {
		cfg.Varnish.Targets = nil
		for _, v := range vs {
			cfg.Varnish.Targets = append(cfg.Varnish.Targets, config.Target{Admin: v.AdminAddr, SecretFile: v.SecretFile})
		}
	})
	return path
}

// banList is a Varnish's ban.list.
func banList(t *testing.T, v *varnishtest.Varnish) string {
	t.Helper()
	c, err := varnishadm.NewFromFile(v.AdminAddr, v.SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := c.Run(t.Context(), "ban.list")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkFleetSurge times the way up in a database surge, side by side
// in one run: three nodes on the fleet recipe and one on its machine's
// signals alone (the default rules), behind the same Apache, sharing the
// same database. s-to-heavy is the seconds from the surge's start to the
// last recipe node in heavy; local-heavy is how often the local node
// reached heavy during the surge (the database's sleeping connections
// give its CPUs nothing to do; on a machine the test shares, its load
// comes from the fleet itself).
func BenchmarkFleetSurge(b *testing.B) {
	f := startFleet(b, 3, 1)
	light := func(s *api.Status) error { return inSync(s, "light") }
	local := f.nodes[3]
	var total time.Duration
	localHeavy := 0
	for range b.N {
		// Every node light first, and the machine quiet: the fleet's own
		// start (four varnishd compiling their profiles) loads the CPUs
		// the local node reads for a minute or two.
		every(b, f.nodes, "light on a quiet machine", 5*time.Minute, func(s *api.Status) error {
			if s.Sample == nil {
				return fmt.Errorf("no sample yet")
			}
			if v, _ := s.Sample.Signal("load_per_cpu"); v >= 0.35 {
				return fmt.Errorf("load_per_cpu %.2f", v)
			}
			return light(s)
		})
		start := time.Now()
		wait := f.surge(b, 40, 10*time.Second)
		every(b, f.nodes[:3], "heavy", 30*time.Second, func(s *api.Status) error { return inSync(s, "heavy") })
		total += time.Since(start)
		for time.Since(start) < 10*time.Second {
			if s, err := local.status(); err == nil && s.State == "heavy" {
				b.Logf("the local node in heavy: %s", s.Reason)
				localHeavy++
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		wait()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-heavy")
	b.ReportMetric(float64(localHeavy)/float64(b.N), "local-heavy")
}

package top

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// wrkRun is how long each wrk run lasts.
const wrkRun = 3 * time.Second

var wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// BenchmarkReasons measures, side by side in one varnishd, heavy's
// throughput with the reason logging and without it (the same VCL with
// its std.log lines removed), alternating short wrk runs on loopback (5 pairs): on
// hits (GET /, nothing logged) and on passes (POST /xmlrpc.php, each a
// fetch that logs its reason). Then the CPU `gearshift top` takes (its own
// and varnishlog's) while the passes run. The backend is a second
// varnishd answering every request itself, so the Go process measures
// nothing but gearshift top. `make bench-reasons` runs it.
func BenchmarkReasons(b *testing.B) {
	wrk := testenv.Need(b, "wrk", "wrk")
	testenv.Need(b, "varnishlog", "varnish")
	origin := varnishtest.Start(b, varnishtest.Config{VCL: "vcl 4.1;\nbackend default none;\n" +
		"sub vcl_recv { return (synth(200)); }\nsub vcl_synth { set resp.body = \"<html>ok</html>\"; return (deliver); }\n"})
	host, port, _ := strings.Cut(origin.HTTPAddr, ":")
	p, _ := strconv.Atoi(port)
	heavy, err := profiles.Render(profiles.Site{Options: profiles.DefaultOptions(), Backend: profiles.BackendAt(host, p)}, state.Heavy)
	if err != nil {
		b.Fatal(err)
	}
	var plain []string
	for _, l := range strings.Split(heavy, "\n") {
		if !strings.Contains(l, `std.log("`+profiles.ReasonLog) {
			plain = append(plain, l)
		}
	}
	v := varnishtest.Start(b, varnishtest.Config{})
	vcls := map[string]string{"logged": heavy, "plain": strings.Join(plain, "\n")}
	for name, text := range vcls {
		file := filepath.Join(v.Dir, name+".vcl")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
		if out, err := v.Adm("vcl.load", name, file); err != nil {
			b.Fatalf("load %s: %v\n%s", name, err, out)
		}
	}
	post := filepath.Join(v.Dir, "post.lua")
	if err := os.WriteFile(post, []byte("wrk.method = \"POST\"\nwrk.body = \"<methodCall/>\"\nwrk.headers[\"Content-Type\"] = \"text/xml\"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	load := map[string][]string{"hits": {v.URL("/")}, "passes": {"-s", post, v.URL("/xmlrpc.php")}}

	// Adjacent runs, in alternating order, make a pair; the overhead is
	// the median of the pairs', which a neighbour's burst on a shared
	// machine moves less than a mean.
	const rounds = 5
	sum := map[string]float64{}
	pairs := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for _, kind := range []string{"hits", "passes"} {
				order := []string{"logged", "plain"}
				if r%2 == 1 {
					order = []string{"plain", "logged"}
				}
				got := map[string]float64{}
				for _, vcl := range order {
					if out, err := v.Adm("vcl.use", vcl); err != nil {
						b.Fatalf("use %s: %v\n%s", vcl, err, out)
					}
					rps, err := runWrk(wrk, wrkRun, load[kind]...)
					if err != nil {
						b.Fatal(err)
					}
					got[vcl] = rps
					sum[kind+"/"+vcl] += rps
				}
				pairs[kind] = append(pairs[kind], (got["plain"]-got["logged"])/got["plain"]*100)
			}
		}
	}
	n := float64(rounds * b.N)
	for _, kind := range []string{"hits", "passes"} {
		b.ReportMetric(sum[kind+"/logged"]/n, kind+"-logged-req/s")
		b.ReportMetric(sum[kind+"/plain"]/n, kind+"-plain-req/s")
		slices.Sort(pairs[kind])
		b.ReportMetric(pairs[kind][len(pairs[kind])/2], kind+"-overhead-%")
		b.Logf("%s: overhead per pair %.1f %%", kind, pairs[kind])
	}

	// gearshift top while the passes run: its CPU, varnishlog's included
	// (a process's rusage counts the children it waited for).
	if out, err := v.Adm("vcl.use", "logged"); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	bin := os.Getenv("GEARSHIFT_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "gearshift")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gearshift").CombinedOutput(); err != nil {
			b.Fatalf("build gearshift: %v\n%s", err, out)
		}
	}
	cfg := filepath.Join(v.Dir, "gearshift.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("varnish: { targets: [ { admin: %s, secret_file: %s, name: %s } ] }\n", v.AdminAddr, v.SecretFile, v.WorkDir)), 0o644); err != nil {
		b.Fatal(err)
	}
	const topRun = 5 * time.Second
	wrkDone := make(chan error, 1)
	var rps float64
	go func() {
		var err error
		rps, err = runWrk(wrk, topRun+2*time.Second, load["passes"]...)
		wrkDone <- err
	}()
	time.Sleep(time.Second)
	cmd := exec.Command(bin, "--config", cfg, "top", "--for", topRun.String(), "--json")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("gearshift top: %v\n%s", err, out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if err := <-wrkDone; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rps, "top-passes-req/s")
	b.ReportMetric(cpu.Seconds()/topRun.Seconds()*100, "top-cpu-%")
	b.ReportMetric(0, "ns/op")
}

// runWrk runs wrk (2 threads, 16 connections) for d with args and returns
// its requests per second.
func runWrk(wrk string, d time.Duration, args ...string) (float64, error) {
	out, err := exec.Command(wrk, append([]string{"-t2", "-c16", "-d" + strconv.Itoa(int(d.Seconds())) + "s"}, args...)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("wrk output without Requests/sec:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// Package promtest runs Debian's Prometheus tools for tests: promtool to
// lint metrics and rules, and a private prometheus server that scrapes a
// target on loopback.
package promtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// Tool returns the path of the Prometheus tool name (promtool,
// prometheus). A missing one fails the test in CI (CI set in the
// environment) and skips it elsewhere, saying why.
func Tool(tb testing.TB, name string) string {
	tb.Helper()
	return testenv.Need(tb, name, "prometheus")
}

// Promtool runs promtool with args and stdin, and returns its combined
// output and whether it exited 0.
func Promtool(tb testing.TB, stdin []byte, args ...string) (string, bool) {
	tb.Helper()
	cmd := exec.Command(Tool(tb, "promtool"), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			tb.Fatalf("run promtool %s: %v", strings.Join(args, " "), err)
		}
		return string(out), false
	}
	return string(out), true
}

// Server is a prometheus server of a test.
type Server struct {
	URL string // http://127.0.0.1:port

	bin  string
	args []string
	dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd // nil while stopped
	exited chan struct{}
	outMu  sync.Mutex   // not mu: a run's output is copied while Stop waits
	out    bytes.Buffer // the output of every run
}

// Stop stops the server (SIGTERM, then SIGKILL after 10s); the test's
// end stops it too. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Restart starts a stopped server again on the same address, with the
// same storage, and returns once it is ready (a server that is not
// within a minute fails the test); a running one is stopped first.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.start(tb)
}

// Start starts prometheus on a free loopback port, with storage in a temp
// dir, scraping target (host:port) every second as job "gearshift", and
// registers its stop (by pid) with tb.Cleanup. It returns once the server
// is ready; a server not ready within a minute fails the test.
func Start(tb testing.TB, target string) *Server {
	tb.Helper()
	return StartJobs(tb, map[string][]string{"gearshift": {target}})
}

// StartJobs is Start with several scrape jobs: each job's targets
// (host:port) are scraped every second.
func StartJobs(tb testing.TB, jobs map[string][]string) *Server {
	tb.Helper()
	bin := Tool(tb, "prometheus")
	dir := tb.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		fmt.Fprintf(&cfg, "  - job_name: %q\n    static_configs:\n      - targets: [", job)
		for i, t := range jobs[job] {
			if i > 0 {
				cfg.WriteString(", ")
			}
			fmt.Fprintf(&cfg, "%q", t)
		}
		cfg.WriteString("]\n")
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	addr := testenv.FreeAddr(tb)
	s := &Server{URL: "http://" + addr, bin: bin, dir: dir, args: []string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("prometheus output:\n%s", s.output())
		}
	})
	s.start(tb)
	return s
}

// output is what the server's runs printed so far.
func (s *Server) output() string {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.out.String()
}

// start runs the server and waits until it is ready.
func (s *Server) start(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = &lockedWriter{s}, &lockedWriter{s}
	cmd.Dir = s.dir
	testenv.DiesWithTest(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			tb.Fatalf("prometheus exited at start:\n%s", s.output())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("prometheus not ready on %s within a minute:\n%s", s.URL, s.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockedWriter appends a run's output to its server's, under its lock.
type lockedWriter struct{ s *Server }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.outMu.Lock()
	defer w.s.outMu.Unlock()
	return w.s.out.Write(p)
}

// Names returns the metric names the server has stored
// (/api/v1/label/__name__/values).
func (s *Server) Names() ([]string, error) {
	var body struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
		Error  string   `json:"error"`
	}
	if err := s.get("/api/v1/label/__name__/values", &body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("label values: %s: %s", body.Status, body.Error)
	}
	return body.Data, nil
}

// Query evaluates expr now and returns the samples' values, by their
// labels printed as {a="b",…}.
func (s *Server) Query(expr string) (map[string]string, error) {
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := s.get("/api/v1/query?query="+url.QueryEscape(expr), &body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s: %s", expr, body.Status, body.Error)
	}
	res := map[string]string{}
	for _, r := range body.Data.Result {
		var keys []string
		for k, v := range r.Metric {
			keys = append(keys, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(keys)
		v, _ := r.Value[1].(string)
		res["{"+strings.Join(keys, ",")+"}"] = v
	}
	return res, nil
}

func (s *Server) get(path string, into any) error {
	resp, err := http.Get(s.URL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}

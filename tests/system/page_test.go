package system

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// The size of the browser window the status page is drawn in, in pixels.
const pageShotWidth, pageShotHeight = 1200, 1600

// The status page in a real browser: a daemon driving a real varnishd,
// with hours of recorded history and a forced climb to heavy of its own,
// serves the page on metrics_listen; headless chromium renders it with the
// gear and the chart's gear band. The screenshot is kept (see
// pageArtifactDir).
func TestStatusPageInBrowser(t *testing.T) {
	chromium := testenv.Need(t, "chromium", "chromium")
	v := varnishtest.Start(t, varnishtest.Config{})
	addr := testenv.FreeAddr(t)
	dir := filepath.Join(t.TempDir(), "history")
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.MetricsListen = addr
		cfg.History.Dir = dir
		set, err := cfg.Signals()
		if err != nil {
			t.Fatal(err)
		}
		// Written before the daemon starts: it appends after these.
		recordPeriod(t, dir, set, time.Now().Add(-time.Minute))
	})
	if _, stderr, code := d.gs("force", "heavy", "--for", "30m"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, stderr)
	}
	url := "http://" + addr + "/"
	// The daemon's own climb, from its records, once the page's cached
	// read of the history has expired.
	forced := regexp.MustCompile(`<td>light</td><td><span class="gear heavy">heavy</span></td><td>forced</td>`)
	d.eventually("the page shows the forced climb", 30*time.Second, func() error {
		body, err := getPage(url)
		if err != nil {
			return err
		}
		if !forced.MatchString(body) {
			return fmt.Errorf("no forced transition to heavy yet:\n%s", body)
		}
		return nil
	})

	// The page is beside the metrics, read-only, and alone at "/".
	if body, err := scrapeMetrics(addr); err != nil || !strings.Contains(body, `gearshift_gear{gear="heavy"} 1`) {
		t.Errorf("GET /metrics beside the page: %v\n%s", err, body)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/status", http.StatusNotFound},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodHead, "/", http.StatusOK},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+addr+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s = %s, want %d", tc.method, tc.path, resp.Status, tc.want)
		}
	}

	dom := runChromium(t, chromium, "--dump-dom", url)
	for _, want := range []string{
		`<h1 id="gear" class="gear heavy">HEAVY</h1>`,
		"forced by the operator until",
		v.AdminAddr, "in sync",
		// The recorded period's climb, and the reason of its way up.
		"load_per_cpu 1.70 &gt;= 1.50 for 3 samples",
		`<span class="gear moderate">moderate</span>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q:\n%s", want, dom)
		}
	}
	if !forced.MatchString(dom) {
		t.Errorf("the rendered page lacks the daemon's forced climb:\n%s", dom)
	}
	chart := regexp.MustCompile(`(?s)<div id="chart"><figure><svg .*?</svg>`).FindString(dom)
	if chart == "" {
		t.Fatalf("the rendered page has no inline SVG chart:\n%s", dom)
	}
	// The gear band: its row, drawn in the colors of the gears the period
	// went through.
	if !strings.Contains(chart, ">gear</text>") {
		t.Errorf("the chart has no gear band:\n%s", chart)
	}
	for gear, color := range map[string]string{"light": "#66bb6a", "moderate": "#ffb300", "heavy": "#e53935"} {
		if !strings.Contains(strings.ToLower(chart), "fill:"+color) {
			t.Errorf("the chart's gear band lacks %s (%s):\n%s", gear, color, chart)
		}
	}

	shot := filepath.Join(t.TempDir(), "status-page.png")
	runChromium(t, chromium, "--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", pageShotWidth, pageShotHeight), url)
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	img, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if img.Width != pageShotWidth || img.Height != pageShotHeight {
		t.Errorf("the screenshot is %d×%d, want %d×%d", img.Width, img.Height, pageShotWidth, pageShotHeight)
	}
	keep := filepath.Join(pageArtifactDir(t), "status-page.png")
	if err := os.WriteFile(keep, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", keep)
}

// recordPeriod writes three hours of history into dir, ending at end: an
// hour in light, a climb through moderate to heavy and back, light again.
// A record every 10 seconds.
func recordPeriod(tb testing.TB, dir string, set *state.Set, end time.Time) {
	tb.Helper()
	spans := []struct {
		gear   state.Gear
		load   float64
		reason string
		for_   time.Duration
	}{
		{state.Light, 0.4, "starting in light", time.Hour},
		{state.Moderate, 1.8, "load_per_cpu 0.90 >= 0.70 for 3 samples", 30 * time.Minute},
		{state.Heavy, 3.4, "load_per_cpu 1.70 >= 1.50 for 3 samples", 20 * time.Minute},
		{state.Moderate, 1.6, "load_per_cpu 0.80 < 1.00 for 60s", 15 * time.Minute},
		{state.Light, 0.5, "load_per_cpu 0.45 < 0.50 for 60s", 55 * time.Minute},
	}
	rec := history.NewRecorder(history.Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: set})
	at := end.Add(-3 * time.Hour)
	for _, s := range spans {
		for stop := at.Add(s.for_); at.Before(stop); at = at.Add(10 * time.Second) {
			err := rec.Write(trace.Sample{
				Time: at,
				Reading: state.Reading{Time: at, Load1: s.load, RunQueue: s.load, CPUs: 2,
					Values: map[string]float64{sensor.MemAvailablePct: 70 - 10*s.load}},
				Recorded: &trace.Recorded{Gear: s.gear, Reason: s.reason},
			})
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := rec.Close(); err != nil {
		tb.Fatal(err)
	}
}

func getPage(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// runChromium runs headless chromium with args in a profile of its own
// and returns its standard output. It fails the test when chromium fails
// or takes more than a minute; every process it started is killed.
func runChromium(tb testing.TB, bin string, args ...string) string {
	tb.Helper()
	profile := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// As root chromium runs only without its sandbox.
	cmd := exec.CommandContext(ctx, bin, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
		"--no-first-run", "--no-default-browser-check", "--disable-dev-shm-usage", "--hide-scrollbars",
	}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+profile, "XDG_CONFIG_HOME="+profile, "XDG_CACHE_HOME="+profile)
	// Its own process group: the renderer and helper processes go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH when none is left
	}
	if ctx.Err() != nil {
		tb.Fatalf("chromium %s: no answer within a minute\n%s", strings.Join(args, " "), &stderr)
	}
	if err != nil {
		tb.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, &stderr)
	}
	return stdout.String()
}

// pageArtifactDir is where the status page's screenshot is kept: the
// directory $GEARSHIFT_ARTIFACTS when set (CI collects it), else
// testdata/artifacts, which git ignores.
func pageArtifactDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("GEARSHIFT_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

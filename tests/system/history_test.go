package system

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/history"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// injectedGears moves the gear with sensor.inject_file alone: moderate
// from 5, heavy from 10, quickly back down.
func injectedGears(inject string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Sensor.InjectFile = inject
		cfg.States.Moderate = config.Band{Enter: config.Rule{"load_per_cpu": 1000, "injected": 5}, Stay: config.Rule{"load_per_cpu": 900, "injected": 4}}
		cfg.States.Heavy = config.Band{Enter: config.Rule{"load_per_cpu": 2000, "injected": 10}, Stay: config.Rule{"load_per_cpu": 1900, "injected": 8}}
		cfg.Hysteresis.UpConfirm = 1
		cfg.Hysteresis.MinDwell = timefmt.Duration(time.Second)
		cfg.Hysteresis.DownWindow = timefmt.Duration(time.Second)
		cfg.Hysteresis.DownTrafficRatio = 0
	}
}

// The flight recorder through a real daemon and varnishd: a climb to heavy
// and back is in the day file, with the decision, the incident and the
// Varnish traffic of each poll; the hooks learn the incident; the records
// survive a SIGKILL.
func TestHistoryRecordsThroughTheDaemon(t *testing.T) {
	dir := t.TempDir()
	inject := filepath.Join(dir, "injected")
	hookOut := filepath.Join(dir, "hook.env")
	os.WriteFile(inject, []byte("0\n"), 0o644)
	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		injectedGears(inject)(cfg)
		cfg.Varnish.Targets[0].Name = v.WorkDir // the traffic, from varnishstat
		cfg.Hooks.OnChange = []string{"/bin/sh", "-c", `{ env | grep ^GEARSHIFT_ | sort; echo --; } >> ` + hookOut}
	})
	if d.cfg.History.Dir == "" {
		t.Fatal("the test config records no history")
	}
	// Traffic through Varnish while the gear climbs and falls.
	stop := make(chan struct{})
	defer close(stop)
	// A connection per request, as from many visitors: varnishd adds a
	// session's counters up when it ends.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if resp, err := client.Get(v.URL(fmt.Sprintf("/page%d", i%5))); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()

	os.WriteFile(inject, []byte("20\n"), 0o644)
	d.eventually("heavy on the injected value", 60*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		return inSync(s, "heavy")
	})
	time.Sleep(time.Second)
	os.WriteFile(inject, []byte("0\n"), 0o644)
	d.eventually("back to light", 60*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.HistoryError != "" {
			return fmt.Errorf("history_error %q", s.HistoryError)
		}
		return inSync(s, "light")
	})
	d.eventually("the hook told the end of the incident", 30*time.Second, func() error {
		b, _ := os.ReadFile(hookOut)
		if !strings.Contains(string(b), "GEARSHIFT_SUMMARY=") {
			return fmt.Errorf("hook environments so far:\n%s", b)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // a few records in light
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited

	hooks, _ := os.ReadFile(hookOut)
	runs := strings.Split(strings.TrimSuffix(string(hooks), "--\n"), "--\n")
	id := regexp.MustCompile(`GEARSHIFT_INCIDENT=(\d{8}T\d{6}Z)\n`).FindStringSubmatch(runs[0])
	if id == nil || !strings.Contains(runs[0], "GEARSHIFT_TO=heavy") || strings.Contains(runs[0], "GEARSHIFT_SUMMARY") {
		t.Fatalf("the climb's hook environment:\n%s", runs[0])
	}
	last := runs[len(runs)-1]
	if !strings.Contains(last, "GEARSHIFT_TO=light") || !strings.Contains(last, "GEARSHIFT_INCIDENT="+id[1]) ||
		!regexp.MustCompile(`GEARSHIFT_SUMMARY=incident `+id[1]+`: \d+s above light, heavy after \d+s, \S+ requests served`).MatchString(last) {
		t.Errorf("the step back's hook environment:\n%s", last)
	}

	set, err := d.cfg.Signals()
	if err != nil {
		t.Fatal(err)
	}
	src, err := history.Open(d.cfg.History.Dir, set, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := history.Collect(src)
	if err != nil {
		t.Fatal(err)
	}
	if w := src.Warnings(); len(w) > 0 {
		t.Errorf("reading the history after a SIGKILL: %v", w)
	}
	var gears []string
	var switched, traffic, incident int
	for _, r := range recs {
		if n := len(gears); n == 0 || gears[n-1] != r.Recorded.Gear.String() {
			gears = append(gears, r.Recorded.Gear.String())
		}
		if r.Recorded.SwitchMS != nil {
			switched++
		}
		if r.Recorded.Rates != nil && r.Reading.Values["client_rps"] > 0 {
			traffic++
		}
		if r.Recorded.Incident == id[1] {
			incident++
		}
		if r.Recorded.SwitchMS != nil && r.Recorded.Gear == state.Heavy && r.Reading.Values["injected"] != 20 {
			t.Errorf("the switch to heavy is recorded without its cause: %+v", r.Reading.Values)
		}
	}
	if got := strings.Join(gears, " "); got != "light heavy moderate light" {
		t.Errorf("recorded gears %s, want light heavy moderate light", got)
	}
	if switched != 3 || traffic == 0 || incident == 0 {
		t.Errorf("of %d records, %d carry a switch time (want 3), %d Varnish traffic, %d the incident %s",
			len(recs), switched, traffic, incident, id[1])
	}

	// gearshift report, from the files alone, tells the incident.
	out, errOut, code := runGearshift(t, "report", "--config", d.configPath, "--since", "1h", "--json")
	var rep struct {
		Incidents []struct {
			ID             string   `json:"id"`
			Peak           string   `json:"peak"`
			SecondsToHeavy *float64 `json:"seconds_to_heavy"`
			Requests       *float64 `json:"requests"`
		} `json:"incidents"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("report: exit %d, %v: %s", code, err, errOut)
	}
	if len(rep.Incidents) != 1 || rep.Incidents[0].ID != id[1] || rep.Incidents[0].Peak != "heavy" ||
		rep.Incidents[0].SecondsToHeavy == nil || rep.Incidents[0].Requests == nil || *rep.Incidents[0].Requests <= 0 {
		t.Errorf("report's incidents: %s", out)
	}
}

// A history.dir that cannot be made (a regular file in its path) costs
// the history, never the gears: config check warns and passes, the daemon
// starts and shifts, status says why in history_error, and check WARNs.
func TestHistoryDirUnderAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "in-the-way")
	os.WriteFile(file, []byte("a file, not a directory\n"), 0o644)
	hist := filepath.Join(file, "history")
	d := launchDaemon(t, func(cfg *config.Config) { cfg.History.Dir = hist })
	if out, errOut, code := d.gs("config", "check"); code != 0 || !strings.Contains(errOut, "warning: history.dir: ") {
		t.Fatalf("config check: exit %d, %q %q; want the config OK with a warning on history.dir", code, out, errOut)
	}
	d.eventually("daemon in sync on light", 90*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		return inSync(s, "light")
	})
	d.eventually("history_error in status", 30*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if !strings.Contains(s.HistoryError, hist) || !strings.Contains(s.HistoryError, "not a directory") {
			return fmt.Errorf("history_error %q, want it to name %s and why", s.HistoryError, hist)
		}
		return nil
	})
	if out, _, code := d.gs("check"); code != 1 || !strings.Contains(out, "cannot record its history") {
		t.Errorf("check: exit %d, %q; want a WARNING naming the history", code, out)
	}
	if _, errOut, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}
	if s, err := d.status(); err != nil || inSync(s, "heavy") != nil {
		t.Fatalf("force heavy without a history: %+v %v", s, err)
	}
}

// A history directory that cannot take a record (a full filesystem) is
// reported in status, check and metrics while the gear still shifts; with
// room again, recording resumes.
func TestHistoryDiskFull(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "history")
	os.Mkdir(hist, 0o750)
	filler := filepath.Join(hist, "filler")
	// A small filesystem of its own where the machine allows it; else a
	// directory that cannot be created (its parent is a file).
	if err := syscall.Mount("tmpfs", hist, "tmpfs", 0, "size=64k,mode=0750"); err == nil {
		t.Cleanup(func() { syscall.Unmount(hist, syscall.MNT_DETACH) })
		f, _ := os.Create(filler)
		for {
			if _, err := f.Write(make([]byte, 4096)); err != nil {
				break
			}
		}
		f.Close()
	} else {
		t.Logf("no tmpfs (%v): a history directory under a file instead", err)
		os.WriteFile(filler, []byte("in the way"), 0o644)
		hist = filepath.Join(filler, "history")
	}
	metrics := testenv.FreeAddr(t)
	d := startDaemon(t, func(cfg *config.Config) {
		cfg.History.Dir = hist
		cfg.MetricsListen = metrics
	})
	d.eventually("history_error in status", 30*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.HistoryError == "" {
			return errors.New("history_error is empty")
		}
		return nil
	})
	if out, _, code := d.gs("check"); code != 1 || !strings.Contains(out, "cannot record its history") {
		t.Errorf("check: exit %d, %q; want a WARNING naming the history", code, out)
	}
	if out, _, code := d.gs("status"); code != 0 || !strings.Contains(out, "NOT RECORDING") {
		t.Errorf("status: exit %d:\n%s", code, out)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`(?m)^gearshift_history_write_errors_total (\d+)`).FindStringSubmatch(string(body)); m == nil || m[1] == "0" {
		t.Errorf("gearshift_history_write_errors_total: %v", m)
	}
	// The gear still shifts.
	if _, errOut, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}
	if s, err := d.status(); err != nil || inSync(s, "heavy") != nil {
		t.Fatalf("force heavy with a full history: %+v %v", s, err)
	}
	if !strings.Contains(d.out.String(), "record history (gears still shift)") {
		t.Errorf("the log does not say the history is not recorded:\n%s", d.out.String())
	}
	if filepath.Base(hist) == "history" && filepath.Base(filepath.Dir(hist)) == "filler" {
		return // the directory under a file cannot be given room
	}
	os.Remove(filler)
	d.eventually("recording again", 30*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		if s.HistoryError != "" {
			return fmt.Errorf("history_error %q", s.HistoryError)
		}
		return nil
	})
	set, _ := d.cfg.Signals()
	src, err := history.Open(hist, set, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	d.eventually("a heavy record", 10*time.Second, func() error {
		recs, _ := history.Collect(src)
		for _, r := range recs {
			if r.Recorded.Gear == state.Heavy && r.Recorded.Forced {
				return nil
			}
		}
		src, _ = history.Open(hist, set, time.Time{}, time.Time{})
		return fmt.Errorf("no forced heavy record among %d", len(recs))
	})
}

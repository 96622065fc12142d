package sensor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

func TestParseVarnishstat(t *testing.T) {
	tests := []struct {
		file    string
		want    VarnishCounters
		wantErr string
	}{
		{file: "7.1-requests.json", want: VarnishCounters{Uptime: 3, ClientReq: 20, CacheMiss: 15, Pass: 5}},
		{file: "7.1-backend-fail.json", want: VarnishCounters{Uptime: 4, ClientReq: 27, BackendFail: 7, CacheMiss: 3, Pass: 1}},
		{file: "6.0-requests.json", want: VarnishCounters{Uptime: 86400, ClientReq: 1201, BackendReq: 310, BackendFail: 2, SessQueued: 5, ThreadQueueLen: 3, CacheHit: 880, CacheMiss: 250, Pass: 71}},
		// 70 of the 310 backend requests were heavy's asks to the daemon
		// for guest pages, in two loaded VCLs.
		{file: "7.1-guest-asks.json", want: VarnishCounters{Uptime: 86400, ClientReq: 1201, BackendReq: 240, BackendFail: 2, SessQueued: 5, ThreadQueueLen: 3, CacheHit: 880, CacheMiss: 250, Pass: 71}},
		// Fetches refused at .max_connections: the site's backends in
		// each loaded VCL, not the daemon's nor the probe's.
		{file: "7.1-busy.json", want: VarnishCounters{Uptime: 3, ClientReq: 20, CacheMiss: 15, Pass: 5, Busy: map[string]uint64{
			"VBE.gearshift-light-1a2b3c4d.default.busy":          2,
			"VBE.gearshift-light-1a2b3c4d.gearshift_copies.busy": 40,
			"VBE.gearshift-heavy-0badc0de.gearshift_copies.busy": 5,
		}}},
		{file: "7.1-no-counters.json", wantErr: "no counter MAIN.uptime"},
		{file: "7.1-missing-counter.json", wantErr: "no counter MAIN.backend_fail"},
		{file: "version-2.json", wantErr: "unknown format version 2"},
		{file: "truncated.json", wantErr: "not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata/varnishstat", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseVarnishstat(b)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseVarnishstat: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseVarnishstat: %v", err)
			}
			if tc.want.Busy == nil {
				tc.want.Busy = map[string]uint64{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseVarnishstat = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCounterRates(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		t       float64
		c       VarnishCounters
		want    VarnishRates
		wantErr string // "" for rates, "baseline" for ErrBaseline
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "first reading is a baseline, then rates",
			steps: []step{
				{t: 0, c: VarnishCounters{Uptime: 100, ClientReq: 1000, BackendReq: 100}, wantErr: "baseline"},
				{t: 2, c: VarnishCounters{Uptime: 102, ClientReq: 2040, BackendReq: 160, BackendFail: 4, SessDropped: 2, SessQueued: 10, ThreadQueueLen: 7, CacheHit: 900, CacheMiss: 60, Pass: 20},
					want: VarnishRates{ClientRPS: 520, BackendRPS: 30, BackendFailRPS: 2, DroppedRPS: 1, QueuedRPS: 5, QueueLen: 7, CacheHitRPS: 450, CacheMissRPS: 30, PassRPS: 10}},
			},
		},
		{
			name: "a restart is a fresh baseline, not a spike",
			steps: []step{
				{t: 0, c: VarnishCounters{Uptime: 9000, ClientReq: 500000}, wantErr: "baseline"},
				{t: 1, c: VarnishCounters{Uptime: 9001, ClientReq: 500400}, want: VarnishRates{ClientRPS: 400}},
				{t: 2, c: VarnishCounters{Uptime: 1, ClientReq: 30}, wantErr: "baseline"},
				{t: 3, c: VarnishCounters{Uptime: 2, ClientReq: 330}, want: VarnishRates{ClientRPS: 300}},
			},
		},
		{
			name: "a restart seen only in the uptime",
			steps: []step{
				{t: 0, c: VarnishCounters{Uptime: 9000, ClientReq: 50}, wantErr: "baseline"},
				{t: 30, c: VarnishCounters{Uptime: 5, ClientReq: 900}, wantErr: "baseline"},
				{t: 31, c: VarnishCounters{Uptime: 6, ClientReq: 1000}, want: VarnishRates{ClientRPS: 100}},
			},
		},
		{
			name: "any counter going down is a restart",
			steps: []step{
				{t: 0, c: VarnishCounters{Uptime: 10, ClientReq: 10, SessDropped: 5}, wantErr: "baseline"},
				{t: 1, c: VarnishCounters{Uptime: 11, ClientReq: 20, SessDropped: 0}, wantErr: "baseline"},
				{t: 2, c: VarnishCounters{Uptime: 12, ClientReq: 30}, want: VarnishRates{ClientRPS: 10}},
			},
		},
		{
			name: "the queue gauge may go down without a restart",
			steps: []step{
				{t: 0, c: VarnishCounters{Uptime: 10, ClientReq: 10, ThreadQueueLen: 9}, wantErr: "baseline"},
				{t: 1, c: VarnishCounters{Uptime: 11, ClientReq: 20, ThreadQueueLen: 0}, want: VarnishRates{ClientRPS: 10}},
			},
		},
		{
			name: "a reading not after the previous is ignored",
			steps: []step{
				{t: 0, c: VarnishCounters{Uptime: 10, ClientReq: 10}, wantErr: "baseline"},
				{t: 0, c: VarnishCounters{Uptime: 10, ClientReq: 99}, wantErr: "baseline"},
				{t: 1, c: VarnishCounters{Uptime: 11, ClientReq: 20}, want: VarnishRates{ClientRPS: 10}},
			},
		},
		{
			name: "an uptime standing still is a dead varnishd",
			steps: []step{
				{t: 0, c: VarnishCounters{Uptime: 10, ClientReq: 10}, wantErr: "baseline"},
				{t: 1, c: VarnishCounters{Uptime: 11, ClientReq: 20}, want: VarnishRates{ClientRPS: 10}},
				// Whole seconds: a second read within the same second is fine.
				{t: 1.5, c: VarnishCounters{Uptime: 11, ClientReq: 25}, want: VarnishRates{ClientRPS: 10}},
				{t: 4, c: VarnishCounters{Uptime: 11, ClientReq: 25}, want: VarnishRates{}},
				{t: 6, c: VarnishCounters{Uptime: 11, ClientReq: 25}, wantErr: "uptime has not moved for 5s: it is not running"},
				{t: 7, c: VarnishCounters{Uptime: 12, ClientReq: 35}, want: VarnishRates{ClientRPS: 10}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r CounterRates
			for i, s := range tc.steps {
				got, err := r.Update(at(s.t), s.c)
				switch {
				case s.wantErr == "baseline":
					if !errors.Is(err, ErrBaseline) {
						t.Errorf("step %d: Update = %+v, %v; want ErrBaseline", i, got, err)
					}
				case s.wantErr != "":
					if err == nil || !strings.Contains(err.Error(), s.wantErr) {
						t.Errorf("step %d: Update error %v, want one containing %q", i, err, s.wantErr)
					}
				case err != nil || got != s.want:
					t.Errorf("step %d: Update = %+v, %v; want %+v", i, got, err, s.want)
				}
			}
		})
	}
}

// writeScript writes an executable shell script standing in for
// varnishstat where real varnishstat cannot misbehave on demand.
func writeScript(tb testing.TB, body string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "varnishstat")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestVarnishstatBounds(t *testing.T) {
	fixture, err := filepath.Abs("testdata/varnishstat/7.1-requests.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		v       Varnishstat
		want    VarnishCounters
		wantErr string
	}{
		{
			name: "arguments",
			// The script answers only when called as Read promises to call it.
			v: Varnishstat{Name: "/var/lib/varnish/www", Binary: writeScript(t,
				`[ "$*" = "-j -1 -t 0 -n /var/lib/varnish/www -f MAIN.uptime -f MAIN.client_req -f MAIN.backend_req -f MAIN.backend_fail -f MAIN.sess_dropped -f MAIN.sess_queued -f MAIN.thread_queue_len -f MAIN.cache_hit -f MAIN.cache_miss -f MAIN.s_pass -f VBE.*.gearshift_guest.req -f VBE.*.busy" ] || { echo "bad args: $*" >&2; exit 1; }
cat `+fixture)},
			want: VarnishCounters{Uptime: 3, ClientReq: 20, CacheMiss: 15, Pass: 5},
		},
		{
			name:    "stalls",
			v:       Varnishstat{Name: "www", Timeout: 200 * time.Millisecond, Binary: writeScript(t, "exec sleep 30")},
			wantErr: "run varnishstat -n www: no answer within 200ms",
		},
		{
			name:    "floods",
			v:       Varnishstat{Name: "www", MaxOutput: 1000, Binary: writeScript(t, "exec yes '{'")},
			wantErr: "run varnishstat -n www: output exceeds 1000 bytes",
		},
		{
			name:    "varnishd not running",
			v:       Varnishstat{Name: "www", Binary: writeScript(t, "echo 'Could not get hold of varnishd, is it running?' >&2; exit 1")},
			wantErr: "run varnishstat -n www: exit status 1: Could not get hold of varnishd, is it running?",
		},
		{
			name:    "not installed",
			v:       Varnishstat{Name: "www", Binary: filepath.Join(t.TempDir(), "missing")},
			wantErr: "run varnishstat -n www:",
		},
		{
			name:    "garbage",
			v:       Varnishstat{Name: "www", Binary: writeScript(t, "echo hello")},
			wantErr: "parse varnishstat -n www: not JSON",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.v.Read(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if tc.want.Busy == nil {
				tc.want.Busy = map[string]uint64{}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Read = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// varnishstatBinary returns varnishstat's path; like varnishtest.Binary, a
// missing program fails the test in CI and skips it elsewhere.
func varnishstatBinary(tb testing.TB) string {
	tb.Helper()
	return testenv.Need(tb, "varnishstat", "varnish")
}

func TestVarnishstatAgainstVarnish(t *testing.T) {
	bin := varnishstatBinary(t)
	var backendHits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendHits.Add(1)
		fmt.Fprintln(w, "hello")
	}))
	defer backend.Close()
	u, _ := url.Parse(backend.URL)
	v := varnishtest.Start(t, varnishtest.Config{VCL: fmt.Sprintf(`vcl 4.1;
backend default { .host = "%s"; .port = "%s"; }
sub vcl_recv { return (pass); }
`, u.Hostname(), u.Port())})
	vs := &Varnishstat{Name: v.WorkDir, Binary: bin}
	ctx := context.Background()

	var rates CounterRates
	before, err := vs.Read(ctx)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	start := time.Now()
	if _, err := rates.Update(start, before); !errors.Is(err, ErrBaseline) {
		t.Fatalf("the first reading: %v, want ErrBaseline", err)
	}
	const n = 40
	for i := 0; i < n; i++ {
		resp, err := http.Get(v.URL(fmt.Sprintf("/page/%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// Worker threads publish their counters a moment after a request ends.
	var after VarnishCounters
	deadline := time.Now().Add(10 * time.Second)
	for {
		if after, err = vs.Read(ctx); err != nil {
			t.Fatalf("Read: %v", err)
		}
		if after.ClientReq-before.ClientReq >= n && after.BackendReq-before.BackendReq >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The request with which varnishtest saw varnishd answer may be
	// published after the first reading: one more is fine.
	if d := after.ClientReq - before.ClientReq; d != n && d != n+1 {
		t.Errorf("client_req went up by %d, want %d", d, n)
	}
	if d := after.BackendReq - before.BackendReq; d != n && d != n+1 {
		t.Errorf("backend_req went up by %d, want %d (the backend saw %d)", d, n, backendHits.Load())
	}
	got, err := rates.Update(time.Now(), after)
	if err != nil || got.ClientRPS <= 0 || got.BackendRPS <= 0 || got.BackendFailRPS != 0 {
		t.Errorf("rates = %+v, %v; want client_rps and backend_rps > 0, no failures", got, err)
	}

	// A restarted varnishd starts its counters again from zero: a baseline.
	v.Restart()
	fresh, err := vs.Read(ctx)
	if err != nil {
		t.Fatalf("Read after restart: %v", err)
	}
	if fresh.ClientReq >= after.ClientReq {
		t.Fatalf("client_req %d after a restart, want below %d", fresh.ClientReq, after.ClientReq)
	}
	if got, err := rates.Update(time.Now(), fresh); !errors.Is(err, ErrBaseline) {
		t.Errorf("rates right after a restart = %+v, %v; want ErrBaseline (a fresh baseline)", got, err)
	}

	// A killed varnishd leaves its shared memory behind, and varnishstat
	// still reads it: only the uptime standing still tells. Time is an
	// input, so the test says the reading came later instead of waiting.
	v.Kill()
	now := time.Now()
	for i, later := range []time.Duration{time.Second, 2 * time.Second, staleAfter + 2*time.Second} {
		dead, err := vs.Read(ctx)
		if err != nil {
			t.Logf("Read of a killed varnishd: %v (fine: nothing to read)", err)
			return
		}
		_, err = rates.Update(now.Add(later), dead)
		if i == 2 && (err == nil || !strings.Contains(err.Error(), "not running")) {
			t.Errorf("rates of a varnishd killed %s ago: error %v, want it not running", later, err)
		}
	}
}

// hit_ratio and backend_share from a real varnishd caching a page: one
// miss, nine hits of ten requests.
func TestVarnishCacheShares(t *testing.T) {
	varnishstatBinary(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprintln(w, "cached page")
	}))
	defer backend.Close()
	host, port, _ := strings.Cut(strings.TrimPrefix(backend.URL, "http://"), ":")
	v := varnishtest.Start(t, varnishtest.Config{VCL: fmt.Sprintf("vcl 4.1;\nbackend default { .host = %q; .port = %q; }\n", host, port)})
	r, err := varnishSource.Open(HostConfig{Varnish: []string{v.WorkDir}})
	if err != nil {
		t.Fatal(err)
	}
	// Varnish publishes a worker's counters some time after its request:
	// the baseline is taken once the counters stand still (varnishtest's
	// own readiness request counted), and the second reading once all ten
	// requests below are.
	stat := Varnishstat{Name: v.WorkDir}
	counted := func(what string, done func(c VarnishCounters) bool) VarnishCounters {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			c, err := stat.Read(context.Background())
			if err == nil && done(c) {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("varnishstat: %s never came: %+v, %v", what, c, err)
			}
		}
	}
	var last VarnishCounters
	var still time.Time
	base := counted("counters standing still", func(c VarnishCounters) bool {
		if c.ClientReq != last.ClientReq || still.IsZero() {
			last, still = c, time.Now()
			return false
		}
		return time.Since(still) >= 1500*time.Millisecond
	})
	if apply, err := r.Read(context.Background()); apply != nil || err != nil {
		t.Fatalf("first read: %v, %v; want a baseline", apply != nil, err)
	}
	// A connection per request: Varnish counts a connection's client
	// requests when its worker lets it go.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 10 {
		resp, err := client.Get(v.URL("/page"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	counted("the 10 requests", func(c VarnishCounters) bool {
		return c.ClientReq >= base.ClientReq+10 && c.CacheHit+c.CacheMiss >= base.CacheHit+base.CacheMiss+10
	})
	apply, err := r.Read(context.Background())
	if err != nil || apply == nil {
		t.Fatalf("second read: %v", err)
	}
	s := Sample{Values: map[string]float64{}}
	apply(&s)
	if h, b := s.Values[HitRatio], s.Values[BackendShare]; math.Abs(h-0.9) > 1e-9 || math.Abs(b-0.1) > 1e-9 {
		t.Errorf("hit_ratio %g, backend_share %g; want 0.9 and 0.1 (%v)", h, b, s.Values)
	}

	// A poll without client requests has no shares, rather than 0.
	time.Sleep(100 * time.Millisecond)
	apply, err = r.Read(context.Background())
	if err != nil || apply == nil {
		t.Fatalf("third read: %v", err)
	}
	s = Sample{Values: map[string]float64{}}
	apply(&s)
	if _, ok := s.Values[HitRatio]; ok || s.Values[state.ClientRPS] != 0 {
		t.Errorf("with no requests: %v", s.Values)
	}
}

func TestCacheShares(t *testing.T) {
	for _, tc := range []struct {
		r            VarnishRates
		hit, backend float64
		ok           bool
	}{
		{VarnishRates{ClientRPS: 100, CacheHitRPS: 90, BackendRPS: 10}, 0.9, 0.1, true},
		{VarnishRates{ClientRPS: 100, BackendRPS: 100}, 0, 1, true},
		{VarnishRates{}, 0, 0, false},                             // no client requests
		{VarnishRates{ClientRPS: 2, BackendRPS: 95}, 0, 0, false}, // client counts late (keep-alive)
	} {
		hit, backend, ok := tc.r.shares()
		if hit != tc.hit || backend != tc.backend || ok != tc.ok {
			t.Errorf("%+v: shares %g, %g, %v; want %g, %g, %v", tc.r, hit, backend, ok, tc.hit, tc.backend, tc.ok)
		}
	}
}

// TestCountersTable: each counter row reads a field of its own, every rate
// goes to a field of its own, and a row's signal is one the source
// declares.
func TestCountersTable(t *testing.T) {
	declared := map[string]bool{}
	for _, sig := range varnishSource.Signals {
		declared[sig.Name] = true
	}
	var c VarnishCounters
	var r VarnishRates
	values, rates, fields := map[*uint64]bool{}, map[*float64]bool{}, map[string]bool{}
	for _, ctr := range counters {
		if fields[ctr.field] || values[ctr.value(&c)] {
			t.Errorf("%s: read twice", ctr.field)
		}
		fields[ctr.field], values[ctr.value(&c)] = true, true
		if ctr.rate != nil {
			if rates[ctr.rate(&r)] {
				t.Errorf("%s: its rate goes where another's does", ctr.field)
			}
			rates[ctr.rate(&r)] = true
		}
		if ctr.signal != "" && (!declared[ctr.signal] || ctr.rate == nil) {
			t.Errorf("%s: signal %q is not the source's, or has no rate", ctr.field, ctr.signal)
		}
	}
}

package sensor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFPMStatus(t *testing.T) {
	tests := []struct {
		name    string
		file    string // under testdata/phpfpm, or text
		text    string
		want    fpmPage
		wantErr string
	}{
		// Real pages of PHP-FPM 8.2 (Debian's php8.2-fpm).
		{name: "own socket counts the read", file: "static-own-socket-full.json", want: fpmPage{
			Pool: "unixpool", ProcessManager: "static", StartTime: 1796195746, ActiveProcesses: 1, TotalProcesses: 1, self: 1}},
		{name: "pm.status_listen does not", file: "static-status-listen-full.json", want: fpmPage{
			Pool: "unixpool", ProcessManager: "static", StartTime: 1796195746, TotalProcesses: 1}},
		{name: "tcp pool without full", file: "dynamic-tcp.json", want: fpmPage{
			Pool: "tcppool", ProcessManager: "dynamic", StartTime: 1796195746, ListenQueueLen: 4096,
			ActiveProcesses: 1, TotalProcesses: 1, MaxChildrenReached: 2}},
		{name: "the text page", file: "dynamic-tcp.txt", wantErr: `not a PHP-FPM status page (not the JSON of ?json: it begins "pool:`},
		{name: "HTML", text: "<html><body>It works!</body></html>", wantErr: `it begins "<html>`},
		{name: "empty", text: "", wantErr: "an empty page"},
		{name: "other JSON", text: `{"status":"ok"}`, wantErr: `no "pool", "listen queue", "active processes", "total processes", "max children reached"`},
		{name: "a JSON list", text: `[1,2]`, wantErr: "not a PHP-FPM status page"},
		{name: "more active than processes", text: `{"pool":"www","listen queue":0,"active processes":3,"total processes":2,"max children reached":0}`,
			wantErr: "3 active of 2 processes"},
		{name: "negative queue", text: `{"pool":"www","listen queue":-1,"active processes":0,"total processes":2,"max children reached":0}`,
			wantErr: "a queue of -1"},
		{name: "status reads of another query count", text: `{"pool":"www","listen queue":2,"listen queue len":511,"active processes":3,"total processes":4,"max children reached":7,
			"processes":[{"state":"Running","request uri":"/status?json"},{"state":"Running","request uri":"/index.php"},{"state":"Reading headers","request uri":"/status"},{"state":"Idle","request uri":"/status"}]}`,
			want: fpmPage{Pool: "www", ListenQueue: 2, ListenQueueLen: 511, ActiveProcesses: 3, TotalProcesses: 4, MaxChildrenReached: 7, self: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.text)
			if tc.file != "" {
				var err error
				if b, err = os.ReadFile(filepath.Join("testdata/phpfpm", tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := parseFPMStatus(b, "/status")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseFPMStatus: error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || *got != tc.want {
				t.Errorf("parseFPMStatus = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestCounterRate(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	steps := []struct {
		name    string
		at      time.Duration
		started int64
		v       uint64
		rate    float64
		ok      bool
	}{
		{"first is a baseline", 0, 100, 5, 0, false},
		{"rate", 2 * time.Second, 100, 9, 2, true},
		{"still", 3 * time.Second, 100, 9, 0, true},
		{"not later", 3 * time.Second, 100, 12, 0, false},
		{"went down: a baseline", 4 * time.Second, 100, 1, 0, false},
		{"after the reset", 5 * time.Second, 100, 2, 1, true},
		{"pool restarted, counter higher: a baseline", 6 * time.Second, 200, 50, 0, false},
		{"after the restart", 8 * time.Second, 200, 51, 0.5, true},
	}
	var c counterRate
	for _, s := range steps {
		rate, ok := c.update(t0.Add(s.at), s.started, s.v)
		if rate != s.rate || ok != s.ok {
			t.Errorf("%s: update = %v, %v; want %v, %v", s.name, rate, ok, s.rate, s.ok)
		}
	}
}

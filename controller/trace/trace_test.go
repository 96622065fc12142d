package trace

import (
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
)

func TestParse(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		csv      string
		check    func(t *testing.T, tr *Trace)
		warnings int
	}{
		{
			name: "all columns, RFC 3339",
			csv: "time,load1,load5,load15,runnable,cpus,mem_available_pct,psi_cpu,psi_mem\n" +
				"2026-11-30T03:00:00Z,1.5,1.2,0.9,3,4,41.5,12.5,0.5\n" +
				"2026-11-30T03:00:01.5Z,1.6,1.2,0.9,4,4,41.0,13,0.6\n",
			check: func(t *testing.T, tr *Trace) {
				s := tr.Samples[0]
				if !s.Time.Equal(t0) || s.Line != 2 || s.Text != "2026-11-30T03:00:00Z" || *s.Load5 != 1.2 || *s.Load15 != 0.9 {
					t.Errorf("sample %+v", s)
				}
				r := s.Reading
				if r.Load1 != 1.5 || r.RunQueue != 3 || r.CPUs != 4 || !maps.Equal(r.Values, map[string]float64{"mem_available_pct": 41.5, "psi_cpu": 12.5, "psi_mem": 0.5}) {
					t.Errorf("reading %+v", r)
				}
				if got := tr.Samples[1].Time.Sub(t0); got != 1500*time.Millisecond {
					t.Errorf("second sample at %s", got)
				}
				if tr.CPUs != "from the cpus column" {
					t.Errorf("CPUs %q", tr.CPUs)
				}
			},
		},
		{
			name: "seconds, minimal columns, any order, spaces",
			csv:  "load1, time\n 0.5, 0\n0.7 ,10.5\n",
			check: func(t *testing.T, tr *Trace) {
				s := tr.Samples[1]
				if s.Time.Sub(tr.Samples[0].Time) != 10500*time.Millisecond || s.Reading.Load1 != 0.7 {
					t.Errorf("sample %+v", s)
				}
				// No runnable column: load1 feeds the fast signal.
				if s.Reading.RunQueue != 0.7 || s.Reading.CPUs != 2 || len(s.Reading.Values) != 0 {
					t.Errorf("reading %+v", s.Reading)
				}
				if tr.CPUs != "from --cpus" {
					t.Errorf("CPUs %q", tr.CPUs)
				}
			},
		},
		{
			name: "empty cells are missing figures",
			csv:  "time,load1,runnable,cpus,mem_available_pct,psi_cpu\n0,2,,,,\n1,2,5,8,30,4\n",
			check: func(t *testing.T, tr *Trace) {
				r := tr.Samples[0].Reading
				if r.RunQueue != 2 || r.CPUs != 2 || len(r.Values) != 0 {
					t.Errorf("first reading %+v", r)
				}
				r = tr.Samples[1].Reading
				if r.RunQueue != 5 || r.CPUs != 8 || !maps.Equal(r.Values, map[string]float64{"mem_available_pct": 30, "psi_cpu": 4}) {
					t.Errorf("second reading %+v", r)
				}
			},
		},
		{
			name: "comments, blank lines and CRLF",
			csv:  "# exported from web1\r\n\r\ntime,load1\r\n# quiet\r\n0,1\r\n60,2\r\n",
			check: func(t *testing.T, tr *Trace) {
				if len(tr.Samples) != 2 || tr.Samples[1].Line != 6 || tr.Samples[1].Reading.Load1 != 2 {
					t.Errorf("samples %+v", tr.Samples)
				}
			},
		},
		{
			name: "sadf -d of sar -q",
			csv: "# hostname;interval;timestamp;runq-sz;plist-sz;ldavg-1;ldavg-5;ldavg-15;blocked\n" +
				"web1;600;2026-11-30 03:10:01 UTC;3;412;1.20;0.90;0.70;0\n" +
				"web1;600;2026-11-30 03:20:01 UTC;9;430;4.10;2.00;1.10;1\n",
			warnings: 3,
			check: func(t *testing.T, tr *Trace) {
				s := tr.Samples[1]
				if !s.Time.Equal(t0.Add(20*time.Minute+time.Second)) || s.Reading.Load1 != 4.1 || s.Reading.RunQueue != 10 || *s.Load15 != 1.1 {
					t.Errorf("sample %+v", s)
				}
				if w := tr.Warnings[0]; w != `line 1, column 1: ignoring unknown column "hostname"` {
					t.Errorf("warning %q", w)
				}
			},
		},
		{
			name: "dates with a zone",
			csv:  "time,load1\n2026-11-30 04:00:00+01:00,1\n2026-11-30 03:00:05,1\n",
			check: func(t *testing.T, tr *Trace) {
				if d := tr.Samples[1].Time.Sub(tr.Samples[0].Time); d != 5*time.Second {
					t.Errorf("gap %s", d)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Parse(strings.NewReader(tc.csv), signals, 2, "from --cpus")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(tr.Warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", tr.Warnings, tc.warnings)
			}
			tc.check(t, tr)
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		csv  string
		want string
	}{
		{"empty", "", "line 1: empty trace: want a header row such as time,load1"},
		{"only comments", "# nothing\n\n", "line 3: empty trace: want a header row such as time,load1"},
		{"no load1", "time,load\n0,1\n", `line 1: the header has no "load1" column (want at least time and load1, got time,load)`},
		{"no time", "load1\n1\n", `line 1: the header has no "time" column (want at least time and load1, got load1)`},
		{"duplicate column", "time,load1,ldavg-1\n0,1,1\n", "line 1, column 3 (ldavg-1): load1 is already column 2"},
		{"header only", "time,load1\n", "line 1: no samples after the header"},
		{"bad number", "time,load1\n0,1\n1,abc\n", `line 3, column 2 (load1): "abc" is not a number`},
		{"NaN", "time,load1\n0,NaN\n", `line 2, column 2 (load1): "NaN" is not a number`},
		{"negative", "time,load1,runnable\n0,1,-2\n", "line 2, column 3 (runnable): -2 is negative"},
		{"empty load1", "time,load1,runnable\n0,,2\n", "line 2, column 2 (load1): empty: every row needs load1"},
		{"percent out of range", "time,load1,mem_available_pct\n0,1,101\n", "line 2, column 3 (mem_available_pct): 101 is out of range 0 to 100"},
		{"psi out of range", "time,psi_cpu,load1\n0,-1,1\n", "line 2, column 2 (psi_cpu): -1 is out of range 0 to 100"},
		{"cpus zero", "time,load1,cpus\n0,1,0\n", "line 2, column 3 (cpus): 0 is below 1"},
		{"cpus fraction", "time,load1,cpus\n0,1,2.5\n", "line 2, column 3 (cpus): 2.5 is not a whole number"},
		{"bad time", "time,load1\nyesterday,1\n", `line 2, column 1 (time): "yesterday" is neither RFC 3339 (2026-11-30T03:00:00Z) nor seconds`},
		{"empty time", "time,load1\n,1\n", "line 2, column 1 (time): empty: every row needs a time"},
		{"time backwards", "time,load1\n10,1\n20,1\n15,1\n", "line 4, column 1 (time): 15 is not after the previous row's 20 (line 3): rows must be in time order"},
		{"mixed times", "time,load1\n10,1\n2026-11-30T03:00:00Z,1\n", `line 3, column 1 (time): "2026-11-30T03:00:00Z" mixes seconds and dates: earlier rows use seconds`},
		{"too many fields", "time,load1\n0,1\n1,2,3\n", "line 3: 3 fields, the header has 2"},
		{"too few fields", "time,load1,cpus\n0,1,2\n1,2\n", "line 3: 2 fields, the header has 3"},
		{"bare quote", "time,load1\n0,1\n1,2\"x\n", `line 3, column 4: bare " in non-quoted-field`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Parse(strings.NewReader(tc.csv), signals, 2, "from --cpus")
			if err == nil {
				t.Fatalf("Parse: want an error, got %d samples", len(tr.Samples))
			}
			var te *Error
			if !errors.As(err, &te) {
				t.Errorf("error %T, want *trace.Error", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func f(v float64) *float64 { return &v }

// TestParseBoundsLineLength: a line longer than MaxLineBytes (a file of
// zeros, a binary mistaken for a trace) is refused, naming the line,
// instead of being read into memory whole.
func TestParseBoundsLineLength(t *testing.T) {
	long := strings.Repeat("1", MaxLineBytes+1)
	tests := []struct {
		name string
		in   io.Reader
		want string
	}{
		{"header", io.LimitReader(zeros{}, 8*MaxLineBytes), "line 1: longer than 64 KiB: a trace row is a handful of figures (is this a CSV trace?)"},
		{"row", strings.NewReader("time,load1\n0,1\n1," + long + "\n"), "line 3: longer than 64 KiB: a trace row is a handful of figures (is this a CSV trace?)"},
		{"endless", zeros{}, "line 1: longer than 64 KiB: a trace row is a handful of figures (is this a CSV trace?)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in, signals, 2, "from --cpus")
			var te *Error
			if !errors.As(err, &te) || err.Error() != tc.want {
				t.Fatalf("Parse: %v (%T), want %s", err, err, tc.want)
			}
		})
	}
	// A line of exactly MaxLineBytes is still read.
	pad := strings.Repeat(" ", MaxLineBytes-len("1,2"))
	tr, err := Parse(strings.NewReader("time,load1\n0,1\n1,2"+pad+"\n"), signals, 2, "from --cpus")
	if err != nil || len(tr.Samples) != 2 {
		t.Fatalf("Parse of a %d-byte line: %v", MaxLineBytes, err)
	}
}

// zeros reads as /dev/zero does.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestParseStripsBOM: a UTF-8 byte order mark, as spreadsheet programs
// write at the start of a CSV export, is not part of the first column's name.
func TestParseStripsBOM(t *testing.T) {
	for _, csv := range []string{
		"\ufefftime,load1\n0,1\n1,2\n",
		"\ufeff# exported\ntime,load1\n0,1\n1,2\n",
		"\ufeff\"time\",load1\n0,1\n1,2\n",
	} {
		tr, err := Parse(strings.NewReader(csv), signals, 2, "from --cpus")
		if err != nil {
			t.Fatalf("Parse(%q): %v", csv, err)
		}
		if len(tr.Samples) != 2 || len(tr.Warnings) != 0 || tr.Samples[1].Reading.Load1 != 2 {
			t.Errorf("Parse(%q) = %d samples, warnings %q", csv, len(tr.Samples), tr.Warnings)
		}
	}
}

// signals are the daemon's signals with no optional source configured:
// every source's signal is a column a trace may have.
var signals = func() *state.Set {
	set, err := sensor.Signals(sensor.HostConfig{})
	if err != nil {
		panic(err)
	}
	return set
}()

func TestColumns(t *testing.T) {
	cols := strings.Join(Columns(signals), ",")
	if !strings.HasPrefix(cols, "mem_available_pct,psi_cpu,psi_mem") {
		t.Errorf("Columns(signals) = %s, want the raw signals of the table, in its order", cols)
	}
	if strings.Contains(cols, "load_per_cpu") {
		t.Errorf("Columns(signals) = %s: load_per_cpu is derived, not a column", cols)
	}
}

// TestRecordedColumns: the flight recorder's columns are a contract of
// the day files (docs/history.md); the rates among them come from the
// varnishstat rows that record one, and read back by column.
func TestRecordedColumns(t *testing.T) {
	want := "gear mode reason switch_ms incident hit_rps miss_rps pass_rps guest_pages"
	if got := strings.Join(RecordedColumns, " "); got != want {
		t.Errorf("RecordedColumns = %s\nwant %s", got, want)
	}
	in := "time,load1,gear,hit_rps,miss_rps,pass_rps\n2026-12-01T03:00:00Z,1.5,heavy,90.5,,3\n"
	tr, err := Parse(strings.NewReader(in), signals, 2, "from --cpus")
	if err != nil {
		t.Fatal(err)
	}
	got := tr.Samples[0].Recorded.Rates
	if len(got) != 2 || got["hit_rps"] != 90.5 || got["pass_rps"] != 3 {
		t.Errorf("rates read = %v, want hit_rps 90.5 and pass_rps 3 (miss_rps empty)", got)
	}
}

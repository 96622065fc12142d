package sensor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v3/load"
	"github.com/shirou/gopsutil/v3/mem"
)

func f(v float64) *float64 { return &v }

func eqF(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func fmtF(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func TestParsePSI(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		some    float64
		full    *float64
		wantErr bool
	}{
		{
			name: "two lines",
			text: "some avg10=1.53 avg60=0.87 avg300=0.28 total=38723581\nfull avg10=0.25 avg60=0.10 avg300=0.00 total=120\n",
			some: 1.53, full: f(0.25),
		},
		{
			name: "one line (cpu on kernels before 5.13)",
			text: "some avg10=42.00 avg60=10.00 avg300=2.00 total=1\n",
			some: 42,
		},
		{name: "no trailing newline", text: "some avg10=0.00 avg60=0.00 avg300=0.00 total=0", some: 0},
		{name: "empty", text: "", wantErr: true},
		{name: "full only", text: "full avg10=1.00 avg60=0 avg300=0 total=0\n", wantErr: true},
		{name: "unknown line", text: "some avg10=1 avg60=0 avg300=0 total=0\nhalf avg10=1\n", wantErr: true},
		{name: "no avg10", text: "some avg60=0.00 avg300=0.00 total=0\n", wantErr: true},
		{name: "bad number", text: "some avg10=x avg60=0.00 avg300=0.00 total=0\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			some, full, err := parsePSI(tc.text)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parsePSI: want an error, got some=%v full=%s", some, fmtF(full))
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePSI: %v", err)
			}
			if some != tc.some || !eqF(full, tc.full) {
				t.Errorf("parsePSI = %v, %s; want %v, %s", some, fmtF(full), tc.some, fmtF(tc.full))
			}
		})
	}
}

func TestReadPSI(t *testing.T) {
	eopnotsupp := func(path string) ([]byte, error) {
		return nil, &fs.PathError{Op: "read", Path: path, Err: syscall.EOPNOTSUPP}
	}
	eacces := func(path string) ([]byte, error) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES}
	}
	tests := []struct {
		name     string
		dir      string
		readFile func(string) ([]byte, error)
		want     *PSI
		wantErr  bool
	}{
		{
			name: "two lines",
			dir:  "testdata/two-lines/pressure",
			want: &PSI{CPUSome: 12.5, CPUFull: f(0), MemorySome: 4.25, MemoryFull: f(1.75), IOSome: 0.6, IOFull: f(0.2)},
		},
		{
			name: "cpu with one line",
			dir:  "testdata/one-line/pressure",
			want: &PSI{CPUSome: 33.1, MemorySome: 4.25, MemoryFull: f(1.75), IOSome: 0.6, IOFull: f(0.2)},
		},
		{name: "missing files", dir: "testdata/no-psi/pressure", want: nil},
		{name: "disabled (EOPNOTSUPP)", dir: "testdata/two-lines/pressure", readFile: eopnotsupp, want: nil},
		{name: "unreadable", dir: "testdata/two-lines/pressure", readFile: eacces, wantErr: true},
		{name: "garbled", dir: "testdata/garbled/pressure", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rf := tc.readFile
			if rf == nil {
				rf = os.ReadFile
			}
			got, err := readPSI(tc.dir, rf)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("readPSI: want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("readPSI: %v", err)
			}
			if !samePSI(got, tc.want) {
				t.Errorf("readPSI = %s, want %s", psiString(got), psiString(tc.want))
			}
		})
	}
}

func samePSI(a, b *PSI) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CPUSome == b.CPUSome && eqF(a.CPUFull, b.CPUFull) &&
		a.MemorySome == b.MemorySome && eqF(a.MemoryFull, b.MemoryFull) &&
		a.IOSome == b.IOSome && eqF(a.IOFull, b.IOFull)
}

func psiString(p *PSI) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("{cpu %v/%s memory %v/%s io %v/%s}", p.CPUSome, fmtF(p.CPUFull),
		p.MemorySome, fmtF(p.MemoryFull), p.IOSome, fmtF(p.IOFull))
}

// TestProcFixtures reads complete fake proc trees through the real gopsutil.
// Every file gopsutil opens is present: when it cannot read loadavg it falls
// back to sysinfo(2), the host's real figures.
func TestProcFixtures(t *testing.T) {
	at := time.Date(2026, 11, 30, 15, 4, 5, 0, time.UTC)
	base := Sample{
		Time: at, Load1: 3.71, Load5: 2.42, Load15: 1.05,
		Runnable: 8, // procs_running 7 + procs_blocked 2 - the poller
		CPUs:     4, MemTotal: 8000000 * 1024, MemAvailable: 1200000 * 1024, SwapUsed: 500000 * 1024,
	}
	tests := []struct {
		root    string
		psi     *PSI
		values  map[string]float64
		wantErr bool
	}{
		{root: "two-lines", psi: &PSI{CPUSome: 12.5, CPUFull: f(0), MemorySome: 4.25, MemoryFull: f(1.75), IOSome: 0.6, IOFull: f(0.2)},
			values: map[string]float64{MemAvailablePct: 15, PSICPU: 12.5, PSIMem: 4.25}},
		{root: "one-line", psi: &PSI{CPUSome: 33.1, MemorySome: 4.25, MemoryFull: f(1.75), IOSome: 0.6, IOFull: f(0.2)},
			values: map[string]float64{MemAvailablePct: 15, PSICPU: 33.1, PSIMem: 4.25}},
		{root: "no-psi", values: map[string]float64{MemAvailablePct: 15}},
		{root: "garbled", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.root, func(t *testing.T) {
			p := newProc(filepath.Join("testdata", tc.root), 4)
			p.now = func() time.Time { return at }
			got, err := p.Sample(context.Background())
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Sample: want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			want := base
			want.PSI, want.Values = tc.psi, tc.values
			if !samePSI(got.PSI, want.PSI) {
				t.Errorf("PSI = %s, want %s", psiString(got.PSI), psiString(want.PSI))
			}
			got.PSI, want.PSI = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Sample =\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

// fakeVitals answers with fixed figures or errors; runq stands for the
// run queue's reader.
type fakeVitals struct {
	avg     *load.AvgStat
	runq    float64
	vm      *mem.VirtualMemoryStat
	err     error // returned by the call named in failing
	failing string
}

func (v fakeVitals) Avg(context.Context) (*load.AvgStat, error) {
	if v.failing == "avg" {
		return nil, v.err
	}
	return v.avg, nil
}

func (v fakeVitals) runQueue() (float64, error) {
	if v.failing == "runq" {
		return 0, v.err
	}
	return v.runq, nil
}

func (v fakeVitals) VirtualMemory(context.Context) (*mem.VirtualMemoryStat, error) {
	if v.failing == "mem" {
		return nil, v.err
	}
	return v.vm, nil
}

func TestProcSample(t *testing.T) {
	boom := errors.New("boom")
	ok := fakeVitals{
		avg:  &load.AvgStat{Load1: 0.5, Load5: 0.4, Load15: 0.3},
		runq: 1.5,
		vm:   &mem.VirtualMemoryStat{Total: 100, Available: 40},
	}
	tests := []struct {
		name    string
		vitals  fakeVitals
		want    Sample
		wantErr string
	}{
		{name: "every figure", vitals: ok,
			want: Sample{Load1: 0.5, Load5: 0.4, Load15: 0.3, Runnable: 1.5, CPUs: 2, MemTotal: 100, MemAvailable: 40,
				Values: map[string]float64{MemAvailablePct: 40}}},
		{name: "load fails", vitals: fakeVitals{avg: ok.avg, runq: ok.runq, vm: ok.vm, failing: "avg", err: boom}, wantErr: "read load average: boom"},
		{name: "run queue fails", vitals: fakeVitals{avg: ok.avg, runq: ok.runq, vm: ok.vm, failing: "runq", err: boom}, wantErr: "read run queue: boom"},
		{name: "memory fails", vitals: fakeVitals{avg: ok.avg, runq: ok.runq, vm: ok.vm, failing: "mem", err: boom}, wantErr: "read memory: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newProc("testdata/no-psi", 2)
			p.vitals = tc.vitals
			p.runQueue = tc.vitals.runQueue
			p.now = func() time.Time { return time.Time{} }
			got, err := p.Sample(context.Background())
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Sample error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Sample: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Sample = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNewProcCPUs(t *testing.T) {
	if got := NewProc(6).CPUs(); got != 6 {
		t.Errorf("NewProc(6).CPUs() = %d, want the override 6", got)
	}
	if got := NewProc(0).CPUs(); got < 1 {
		t.Errorf("NewProc(0).CPUs() = %d, want the detected count", got)
	}
}

func TestSampleReading(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	want := map[string]float64{"mem_available_pct": 25, "psi_cpu": 12.5, "psi_mem": 0.5}
	s := Sample{Time: t0, Load1: 1, Runnable: 4, CPUs: 2, Values: maps.Clone(want)}
	r := s.Reading()
	if r.Load1 != 1 || r.RunQueue != 4 || r.CPUs != 2 || !r.Time.Equal(t0) || !maps.Equal(r.Values, want) {
		t.Errorf("Reading() = %+v, want values %v", r, want)
	}
	r.Values["psi_cpu"] = 99
	if s.Values["psi_cpu"] != 12.5 {
		t.Error("the reading shares the sample's values")
	}
	if r := (Sample{Load1: 0.5}).Reading(); len(r.Values) != 0 {
		t.Errorf("without memory or PSI: values %v, want none", r.Values)
	}
}

package history

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

var testSet = state.MustSet(state.Builtin, sensor.Sources[0].Signals, []state.Signal{
	{Name: state.ClientRPS, Direction: state.Rises, Max: 1e12},
	{Name: sensor.BackendRPS, Direction: state.Rises, Max: 1e12},
})

func f(v float64) *float64 { return &v }

// sample is a record at t in gear g with the traffic client and backend.
func sample(t time.Time, g state.Gear, client, backend float64) trace.Sample {
	return trace.Sample{
		Time: t, Load5: f(0.5), Load15: f(0.25),
		Reading: state.Reading{Time: t, Load1: 1.5, RunQueue: 2, CPUs: 2, Values: map[string]float64{
			"mem_available_pct": 40, state.ClientRPS: client, sensor.BackendRPS: backend,
		}},
		Recorded: &trace.Recorded{Gear: g, Reason: `load_per_cpu 1.5 >= 0.7, "quoted"`, Rates: map[string]float64{"hit_rps": client - backend}},
	}
}

func TestRecordAndRead(t *testing.T) {
	dir := t.TempDir()
	r := NewRecorder(Options{Dir: filepath.Join(dir, "h"), Keep: 14 * 24 * time.Hour, Signals: testSet})
	t0 := time.Date(2026, 11, 30, 23, 59, 58, 0, time.UTC)
	for i := range 5 {
		if err := r.Write(sample(t0.Add(time.Duration(i)*time.Second), state.Moderate, 100, 10)); err != nil {
			t.Fatal(err)
		}
	}
	// A sample not after the last one (the clock stepped back) is left out.
	if err := r.Write(sample(t0, state.Light, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := List(filepath.Join(dir, "h"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Day != "2026-11-30" || !files[0].Compressed || files[1].Day != "2026-12-01" || files[1].Compressed {
		t.Fatalf("files = %+v, want 2026-11-30 compressed and 2026-12-01 plain", files)
	}

	src, err := Open(filepath.Join(dir, "h"), testSet, t0.Add(time.Second), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Collect(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("read %d records from %s on, want 4; warnings %v", len(got), t0.Add(time.Second), src.Warnings())
	}
	s := got[0]
	if !s.Time.Equal(t0.Add(time.Second)) || s.Reading.Load1 != 1.5 || *s.Load5 != 0.5 || s.Reading.CPUs != 2 ||
		s.Reading.Values["mem_available_pct"] != 40 || s.Reading.Values[state.ClientRPS] != 100 ||
		s.Recorded.Gear != state.Moderate || s.Recorded.Reason != `load_per_cpu 1.5 >= 0.7, "quoted"` || s.Recorded.Rates["hit_rps"] != 90 ||
		s.Recorded.SwitchMS != nil {
		t.Errorf("first record = %+v %+v", s, s.Recorded)
	}
	if w := src.Warnings(); len(w) != 0 {
		t.Errorf("warnings %v", w)
	}
}

func TestTornLine(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	r := NewRecorder(Options{Dir: dir, Keep: 24 * time.Hour, Signals: testSet})
	for i := range 3 {
		if err := r.Write(sample(t0.Add(time.Duration(i)*time.Second), state.Heavy, 10, 1)); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	path := filepath.Join(dir, "2026-12-01.csv")
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	file.WriteString("2026-12-01T03:00:03.000Z,1.5,0.5") // a crash mid-write
	file.Close()

	read := func() []trace.Sample {
		t.Helper()
		src, err := Open(dir, testSet, t0, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Collect(src)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); len(got) != 3 {
		t.Fatalf("read %d records past a torn line, want 3", len(got))
	}
	// A restarted recorder cuts the torn line off and appends after it.
	r = NewRecorder(Options{Dir: dir, Keep: 24 * time.Hour, Signals: testSet})
	if err := r.Write(sample(t0.Add(4*time.Second), state.Light, 10, 5)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	got := read()
	if len(got) != 4 || got[3].Recorded.Gear != state.Light {
		t.Fatalf("after a restart read %d records, want 4 ending in light", len(got))
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "0.5\n2026") || strings.Count(string(b), "\n") != 5 {
		t.Errorf("the torn line was not cut off:\n%s", b)
	}
}

func TestNewColumnsStartAPart(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	r := NewRecorder(Options{Dir: dir, Keep: 24 * time.Hour, Signals: testSet})
	r.Write(sample(t0, state.Light, 1, 1))
	r.Close()
	r = NewRecorder(Options{Dir: dir, Keep: 24 * time.Hour, Signals: state.MustSet(state.Builtin)})
	r.Write(sample(t0.Add(time.Second), state.Light, 1, 1))
	r.Close()
	files, _ := List(dir)
	if len(files) != 2 || files[1].Part != 2 || filepath.Base(files[1].Path) != "2026-12-01.2.csv" {
		t.Fatalf("files = %+v, want a second part for the new columns", files)
	}
	src, _ := Open(dir, testSet, t0, time.Time{})
	if got, _ := Collect(src); len(got) != 2 {
		t.Errorf("read %d records over two parts, want 2 (warnings %v)", len(got), src.Warnings())
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"2026-11-01.csv.gz", "2026-11-20.csv.gz", "2026-11-28.csv.gz", "2026-11-30.csv", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 400_000), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	r := NewRecorder(Options{Dir: dir, Keep: 14 * 24 * time.Hour, MaxBytes: 700_000, Signals: testSet})
	if err := r.Write(sample(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), state.Light, 1, 1)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	var names []string
	files, _ := List(dir)
	for _, f := range files {
		names = append(names, filepath.Base(f.Path))
	}
	// 11-01 is older than 14 days; 11-20 goes for the byte bound; 11-30
	// is compressed (a file of zeros compresses to almost nothing).
	if got := strings.Join(names, " "); got != "2026-11-28.csv.gz 2026-11-30.csv.gz 2026-12-01.csv" {
		t.Errorf("files left: %s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("a file not of the history was touched: %v", err)
	}
	zf, _ := os.Open(filepath.Join(dir, "2026-11-30.csv.gz"))
	zr, err := gzip.NewReader(zf)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); len(b) != 0 {
		t.Errorf("compressed %d bytes of a file without a newline, want its torn line left out", len(b))
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker(testSet)
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	add := func(sec int, g state.Gear, client, backend float64) (*Incident, *Incident) {
		return tr.Add(Point{Time: t0.Add(time.Duration(sec) * time.Second), Gear: g,
			Signals: map[string]float64{state.ClientRPS: client, sensor.BackendRPS: backend, "load_per_cpu": client / 100}})
	}
	add(0, state.Light, 100, 50)
	add(10, state.Light, 100, 50) // light: half the requests reach the backend
	started, _ := add(20, state.Moderate, 200, 100)
	if started == nil || started.ID != "20261201T030020Z" {
		t.Fatalf("started = %+v", started)
	}
	add(30, state.Heavy, 1000, 100)
	add(40, state.Heavy, 1000, 100)
	_, ended := add(50, state.Light, 100, 50)
	if ended == nil || tr.Current() != nil {
		t.Fatal("the step to light ended no incident")
	}
	if ended.ToHeavy != 10*time.Second || ended.Peak != state.Heavy || ended.Duration(time.Time{}) != 30*time.Second {
		t.Errorf("incident %+v", ended)
	}
	// 10 s each at 1000, 1000 and 100 rps; the backend had 100, 100, 50.
	if ended.Requests != 21000 || ended.Backend != 2500 || ended.WithoutShift != 10500 || ended.Saved() != 8000 {
		t.Errorf("requests %v, backend %v, without the shift %v", ended.Requests, ended.Backend, ended.WithoutShift)
	}
	if ended.Worst["load_per_cpu"] != 10 {
		t.Errorf("worst load_per_cpu %v, want 10", ended.Worst["load_per_cpu"])
	}
	want := "incident 20261201T030020Z: 30s above light, heavy after 10s, 21k requests served, 2.5k reached the backend, about 8.0k spared"
	if got := ended.Summary(time.Time{}); got != want {
		t.Errorf("summary\n got %s\nwant %s", got, want)
	}

	// A silence of three hours (the daemon stopped, the clock stepped)
	// counts no traffic: the rate of one poll is not the rate of hours.
	add(100, state.Heavy, 100, 10)
	add(100+3*3600, state.Heavy, 100, 10)
	if _, in := add(110+3*3600, state.Light, 100, 10); in == nil || in.Requests != 1000 {
		t.Errorf("requests over a 3h gap: %+v", in)
	}
}

// BenchmarkRecorderDay records a day at one sample a second, the default
// poll, with every signal of a host with Varnish: the CPU of a record, and
// the bytes a day takes plain (today's file) and compressed (past days).
func BenchmarkRecorderDay(b *testing.B) {
	const day = 86400
	set := state.MustSet(state.Builtin, sensor.Sources[0].Signals, sensor.Sources[2].Signals)
	var plain, zipped int64
	for b.Loop() {
		dir := b.TempDir()
		r := NewRecorder(Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: set})
		t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
		for i := range day {
			s := sample(t0.Add(time.Duration(i)*time.Second), state.Gear(i/3600%3), 300+float64(i%97), 30+float64(i%13))
			s.Reading.Load1 = 0.5 + float64(i%211)/100
			s.Reading.RunQueue = float64(i % 7)
			for _, sig := range set.All() {
				if _, ok := s.Reading.Values[sig.Name]; !ok && sig.Raw() {
					s.Reading.Values[sig.Name] = float64(i%1000) / 1000
				}
			}
			if err := r.Write(s); err != nil {
				b.Fatal(err)
			}
		}
		fi, err := os.Stat(filepath.Join(dir, "2026-11-30.csv"))
		if err != nil {
			b.Fatal(err)
		}
		plain = fi.Size()
		// The next day's first record compresses this one.
		if err := r.Write(sample(t0.Add(day*time.Second), state.Light, 1, 1)); err != nil {
			b.Fatal(err)
		}
		r.Close()
		fi, err = os.Stat(filepath.Join(dir, "2026-11-30.csv.gz"))
		if err != nil {
			b.Fatal(err)
		}
		zipped = fi.Size()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*day), "ns/record")
	b.ReportMetric(float64(plain)/1e6, "MB/day")
	b.ReportMetric(float64(zipped)/1e6, "MB-gz/day")
}

// A clock that jumps a year ahead and comes back removes no history, and
// recording goes on after it; a day file removed under the recorder is
// made again.
func TestClockJumpsAndRemovedFiles(t *testing.T) {
	dir := t.TempDir()
	r := NewRecorder(Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: testSet})
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for d := range 3 {
		if err := r.Write(sample(t0.AddDate(0, 0, d), state.Light, 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Write(sample(t0.AddDate(1, 0, 0), state.Light, 1, 1)); err != nil { // the clock a year ahead
		t.Fatal(err)
	}
	back := t0.AddDate(0, 0, 2).Add(time.Hour) // NTP sets it right
	if err := r.Write(sample(back, state.Heavy, 1, 1)); err != nil {
		t.Fatal(err)
	}
	r.maintaining.Wait()
	files, _ := List(dir)
	var days []string
	for _, f := range files {
		days = append(days, f.Day)
	}
	if got := strings.Join(days, " "); got != "2026-11-28 2026-11-29 2026-11-30 2027-11-28" {
		t.Errorf("days left after the clock jumped a year: %s", got)
	}
	src, _ := Open(dir, testSet, back, back.Add(time.Second))
	if got, _ := Collect(src); len(got) != 1 || got[0].Recorded.Gear != state.Heavy {
		t.Errorf("the record after the clock came back: %d records", len(got))
	}

	// Today's file removed (to free space, with its directory): the next
	// record makes it again instead of writing into the removed file.
	os.RemoveAll(dir)
	if err := r.Write(sample(back.Add(time.Second), state.Light, 1, 1)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	src, err := Open(dir, testSet, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Collect(src); len(got) != 1 {
		t.Errorf("after the directory was removed, read %d records, want 1", len(got))
	}
}

// The recorder writes no file through a link: neither a history.dir that
// is one nor a link planted at a day file's path.
func TestRecorderRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o750)
	link := filepath.Join(dir, "history")
	os.Symlink(real, link)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := NewRecorder(Options{Dir: link, Keep: 14 * 24 * time.Hour, Signals: testSet})
	if err := r.Write(sample(t0, state.Light, 1, 1)); err == nil || !strings.Contains(err.Error(), "history directory "+link+" is a symbolic link, not followed") {
		t.Errorf("Write into a linked directory = %v", err)
	}
	r.Close()

	target := filepath.Join(dir, "shadow")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	os.Symlink(target, filepath.Join(real, "2026-11-30.csv"))
	r = NewRecorder(Options{Dir: real, Keep: 14 * 24 * time.Hour, Signals: testSet})
	defer r.Close()
	if err := r.Write(sample(t0, state.Light, 1, 1)); err == nil || !strings.Contains(err.Error(), "is a symbolic link, not followed") {
		t.Errorf("Write through a planted link = %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("the link's target was written: %q", b)
	}
}

// The recorder writes in no directory the config's trust check refuses
// (config check only warns about it): not in one every user may write,
// nor under one; it says why, and records once the directory is fixed.
func TestRecorderRefusesUntrustedDirectory(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o750)
	os.Chmod(open, 0o777)
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, dir := range []string{open, filepath.Join(open, "history")} {
		r := NewRecorder(Options{Dir: dir, Keep: 14 * 24 * time.Hour, Signals: testSet})
		if err := r.Write(sample(t0, state.Light, 1, 1)); err == nil || !strings.Contains(err.Error(), "history directory "+dir+" not written: ") ||
			!strings.Contains(err.Error(), "is writable by every user") {
			t.Errorf("Write into %s = %v, want it refused", dir, err)
		}
		if files, _ := List(dir); len(files) != 0 {
			t.Errorf("files written in %s: %v", dir, files)
		}
		os.Chmod(open, 0o750)
		if err := r.Write(sample(t0.Add(time.Second), state.Light, 1, 1)); err != nil {
			t.Errorf("Write into %s once trusted: %v", dir, err)
		}
		r.Close()
		os.Chmod(open, 0o777)
	}
}

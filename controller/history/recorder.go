// Package history is gearshift's flight recorder: every sample and the
// decision made on it, appended to one CSV file per day in the trace format
// `gearshift simulate` reads, older days compressed, bounded in days and
// bytes; and the reading of those files back, for report, replay and tune.
//
// Durability: each record is one write(2) of a whole line to a file opened
// with O_APPEND, and nothing is buffered in the process, so a daemon killed
// at any moment loses no record it wrote; a torn last line (a full disk, a
// crash of the machine) is cut off when the file is next opened, and
// skipped by readers. Records are not fsynced one by one (that would be a
// disk flush a second): a day file is fsynced when it is closed and when it
// is compressed, so a power cut loses at most what the kernel had not yet
// written back (about 30 seconds).
package history

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/sensor"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
	"github.com/gearshift/gearshift/internal/ownfile"
)

// File names: the day (UTC) and, when the columns changed during the day
// (a restart with other signals, a reload that adds the first site or
// removes the last), a part number: 2026-12-01.csv,
// 2026-12-01.2.csv; compressed: 2026-11-30.csv.gz.
const (
	dayLayout = "2006-01-02"
	plainExt  = ".csv"
	gzipExt   = ".csv.gz"
)

// Options configure a Recorder.
type Options struct {
	Dir      string        // the history directory; created when missing
	Keep     time.Duration // days kept (rounded up to whole days); older day files are removed
	MaxBytes int64         // the most all files may take; the oldest go first (0: no bound)
	Signals  *state.Set    // the signals recorded: the raw ones, as columns
	// OnMaintain, when set, receives the error of each background
	// compression and pruning (nil when it went well).
	OnMaintain func(error)
}

// Recorder appends records to the day files of a directory. Its methods
// are for one goroutine (the daemon's loop); compression and pruning run
// in the background, one at a time.
type Recorder struct {
	opts    Options
	signals []string // the raw signals' names, the columns after cpus
	header  string   // the open file's: base, with trace.SiteColumns when sites
	base    string   // the header without the sites' columns
	sites   bool     // records carry the sites' columns (the config has sites)

	f    *os.File
	path string
	day  string
	last time.Time // the time of the last record written
	line []byte

	maintaining sync.WaitGroup
	busy        sync.Mutex   // held by the running maintenance
	writing     atomic.Value // string: the day being written, never compressed
}

// NewRecorder returns a recorder for opts. It touches no file: the first
// Write creates the directory and the day's file.
func NewRecorder(opts Options) *Recorder {
	r := &Recorder{opts: opts}
	cols := []string{"time", "load1", "load5", "load15", "runnable", "cpus"}
	for _, sig := range opts.Signals.All() {
		if sig.Raw() {
			r.signals = append(r.signals, sig.Name)
		}
	}
	cols = append(append(cols, r.signals...), trace.RecordedColumns...)
	r.base = strings.Join(cols, ",")
	r.header = r.base + "\n"
	return r
}

// Dir is the history directory.
func (r *Recorder) Dir() string { return r.opts.Dir }

// clockStep is how far back a sample may be before the recorder takes it
// for the wall clock stepping back (NTP fixing a clock that was ahead)
// rather than a sample out of order, and records on from it.
const clockStep = time.Minute

// Write appends s, which must carry its Recorded decision. A sample not
// later than the last one written (to the millisecond, as written) is left
// out, unless it is more than clockStep back: then the clock stepped back
// and recording goes on from it (readers skip what is out of order). On an
// error the file is closed and the next Write opens it again, so a disk
// that was full records again once there is room; a day file removed or
// renamed under the recorder is opened anew.
func (r *Recorder) Write(s trace.Sample) error {
	if s.Recorded == nil {
		return errors.New("history: a record needs its decision")
	}
	t := s.Time.Truncate(time.Millisecond)
	if !t.After(r.last) && r.last.Sub(t) <= clockStep {
		return nil
	}
	day := s.Time.UTC().Format(dayLayout)
	if sites := s.Recorded.Sites != nil; sites != r.sites {
		// A reload added the first site or removed the last: the
		// columns change, and so does the part of the day written.
		r.closeFile()
		r.sites, r.header = sites, r.base+"\n"
		if sites {
			r.header = r.base + "," + strings.Join(trace.SiteColumns, ",") + "\n"
		}
	}
	if r.f == nil || day != r.day || r.gone() {
		if err := r.open(day); err != nil {
			return err
		}
	}
	r.line = r.appendRecord(r.line[:0], s)
	if _, err := r.f.Write(r.line); err != nil {
		r.closeFile()
		return fmt.Errorf("write history %s: %w", r.path, err)
	}
	r.last = t
	return nil
}

// gone tells whether the open day file is no longer at its path (removed
// to free space, or with its directory): writes to it would be lost.
func (r *Recorder) gone() bool {
	open, err := r.f.Stat()
	if err != nil {
		return true
	}
	named, err := os.Stat(r.path)
	return err != nil || !os.SameFile(open, named)
}

// Close closes the day's file, fsynced, and waits for a running
// compression or pruning.
func (r *Recorder) Close() error {
	err := r.closeFile()
	r.maintaining.Wait()
	return err
}

func (r *Recorder) closeFile() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Sync()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	r.f = nil
	return err
}

// open makes the day's file the one written: the day's last part when its
// header is this recorder's (its torn last line cut off), else a new part.
// A new day starts the background compression of the days before it.
func (r *Recorder) open(day string) error {
	newDay := day != r.day
	if r.day != "" && day < r.day {
		// The clock came back to a day a running pass may be
		// compressing: no pass touches it from now on, and the one
		// running ends before the file is opened (a rare wait).
		r.writing.Store(day)
		r.maintaining.Wait()
	}
	r.closeFile()
	// The daemon runs as root: a directory someone else could write is
	// not written in (config.CheckTrustedDir's rules, which config check
	// reports as a warning), and the gears shift on without a history.
	if err := config.CheckTrustedDir(r.opts.Dir); err != nil {
		return fmt.Errorf("history directory %s not written: %w", r.opts.Dir, err)
	}
	if err := os.MkdirAll(r.opts.Dir, 0o750); err != nil {
		return fmt.Errorf("create history directory: %w", err)
	}
	// The directory root writes its files in is named, not reached
	// through a link that someone could have planted or repointed.
	if fi, err := os.Lstat(r.opts.Dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("history directory %s is a symbolic link, not followed: set history.dir to the directory itself", r.opts.Dir)
	}
	files, err := List(r.opts.Dir)
	if err != nil {
		return err
	}
	var parts []string // the day's plain parts, in order (List sorts them)
	for _, f := range files {
		if f.Day == day && !f.Compressed {
			parts = append(parts, f.Path)
		}
	}
	path := filepath.Join(r.opts.Dir, day+plainExt)
	if n := len(parts); n > 0 {
		path = parts[n-1]
		if ok, err := r.resume(path); err != nil {
			return err
		} else if !ok {
			path = filepath.Join(r.opts.Dir, fmt.Sprintf("%s.%d%s", day, partNumber(path)+1, plainExt))
		}
	}
	f, err := ownfile.Open(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		if _, err := f.WriteString(r.header); err != nil {
			f.Close()
			return fmt.Errorf("write history %s: %w", path, err)
		}
	}
	r.f, r.path, r.day = f, path, day
	r.writing.Store(day)
	if newDay {
		r.maintain(day)
	}
	return nil
}

// resume tells whether path can be appended to: its header is this
// recorder's. It cuts a torn last line off first.
func (r *Recorder) resume(path string) (bool, error) {
	f, err := ownfile.Open(path, os.O_RDWR)
	if err != nil {
		return false, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	header, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("read history %s: %w", path, err)
	}
	if header != r.header {
		fi, err := f.Stat()
		// An empty file (created, then the disk was full) is as good as new.
		return err == nil && fi.Size() == 0, nil
	}
	end, err := completeEnd(f)
	if err != nil {
		return false, fmt.Errorf("read history %s: %w", path, err)
	}
	if err := f.Truncate(end); err != nil {
		return false, fmt.Errorf("cut the torn last line of %s: %w", path, err)
	}
	return true, nil
}

// completeEnd returns the size of f up to its last newline.
func completeEnd(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	for end := fi.Size(); end > 0; {
		n := int64(len(buf))
		if n > end {
			n = end
		}
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := strings.LastIndexByte(string(buf[:n]), '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// partNumber is the part of a day file's name: 1 for 2026-12-01.csv, 2 for
// 2026-12-01.2.csv.
func partNumber(path string) int {
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), gzipExt), plainExt)
	if _, part, ok := strings.Cut(name, "."); ok {
		if n, err := strconv.Atoi(part); err == nil {
			return n
		}
	}
	return 1
}

// appendRecord appends s as one CSV line.
func (r *Recorder) appendRecord(b []byte, s trace.Sample) []byte {
	num := func(v float64, prec int) {
		b = append(b, ',')
		b = strconv.AppendFloat(b, v, 'f', prec, 64)
	}
	opt := func(v *float64, prec int) {
		if v != nil {
			num(*v, prec)
		} else {
			b = append(b, ',')
		}
	}
	b = s.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	num(s.Reading.Load1, 2)
	opt(s.Load5, 2)
	opt(s.Load15, 2)
	num(s.Reading.RunQueue, 2)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(s.Reading.CPUs), 10)
	for _, name := range r.signals {
		if v, ok := s.Reading.Values[name]; ok {
			num(v, 3)
		} else {
			b = append(b, ',')
		}
	}
	rec := s.Recorded
	mode := "auto"
	if rec.Forced {
		mode = "forced"
	}
	b = append(b, ',')
	b = append(b, rec.Gear.String()...)
	b = append(b, ',')
	b = append(b, mode...)
	b = append(b, ',')
	b = appendQuoted(b, rec.Reason)
	opt(rec.SwitchMS, 3)
	b = append(b, ',')
	b = appendQuoted(b, rec.Incident)
	for _, col := range sensor.RecordedRates() {
		if v, ok := rec.Rates[col]; ok {
			num(v, 1)
		} else {
			b = append(b, ',')
		}
	}
	opt(rec.GuestPages, 0)
	if r.sites {
		b = trace.AppendSites(b, rec.Sites, rec.SiteFetches)
	}
	return append(b, '\n')
}

// appendQuoted appends s as a CSV field, on one line.
func appendQuoted(b []byte, s string) []byte {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ")
	if !strings.ContainsAny(s, `,"`) {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(s, `"`, `""`)...)
	return append(b, '"')
}

// maintain compresses the plain files of the days before today and prunes
// the directory, in the background, after any pass still running.
func (r *Recorder) maintain(today string) {
	r.maintaining.Add(1)
	go func() {
		defer r.maintaining.Done()
		// One pass at a time; a day that starts while the last pass
		// runs waits for it rather than being skipped (its day before
		// would stay uncompressed until the next day).
		r.busy.Lock()
		defer r.busy.Unlock()
		writing, _ := r.writing.Load().(string)
		err := errors.Join(compressBefore(r.opts.Dir, today, writing), r.prune(today))
		if r.opts.OnMaintain != nil {
			r.opts.OnMaintain(err)
		}
	}()
}

// compressBefore gzips every plain day file of dir older than today.
// The day being written (an earlier one when the clock came back) is
// left alone.
func compressBefore(dir, today, writing string) error {
	files, err := List(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		if f.Compressed || f.Day >= today || f.Day == writing {
			continue
		}
		if _, err := os.Stat(gzipName(f.Path)); err == nil {
			// Compressed, then the machine stopped before the plain
			// file was removed: the .gz is whole (written, fsynced,
			// then renamed).
			errs = append(errs, os.Remove(f.Path))
			continue
		}
		errs = append(errs, compress(f.Path))
	}
	return errors.Join(errs...)
}

// gzipName is the compressed file of the plain day file path.
func gzipName(path string) string { return strings.TrimSuffix(path, plainExt) + gzipExt }

// compress writes path.gz beside path, fsynced, then removes path. A
// torn last line is left out.
func compress(path string) error {
	in, err := ownfile.Open(path, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer in.Close()
	end, err := completeEnd(in)
	if err != nil {
		return err
	}
	dst := gzipName(path)
	tmp := dst + ".tmp"
	out, err := ownfile.Open(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("compress history: %w", err)
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, io.NewSectionReader(in, 0, end))
	err = errors.Join(err, zw.Close(), out.Sync(), out.Close())
	if now, serr := completeEnd(in); err == nil && serr == nil && now > end {
		// Written to meanwhile (the clock came back to this day):
		// left for a later pass rather than losing those records.
		os.Remove(tmp)
		return nil
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("compress history %s: %w", path, err)
	}
	return os.Remove(path)
}

// prune removes the day files older than Keep, then the oldest until the
// files fit in MaxBytes; today's files stay.
func (r *Recorder) prune(today string) error {
	files, err := List(r.opts.Dir)
	if err != nil {
		return err
	}
	t, _ := time.Parse(dayLayout, today)
	keepDays := int((r.opts.Keep + 24*time.Hour - 1) / (24 * time.Hour))
	oldest := t.AddDate(0, 0, 1-max(keepDays, 1)).Format(dayLayout)
	var total int64
	newest := ""
	for _, f := range files {
		total += f.Size
		if f.Day < today {
			newest = max(newest, f.Day)
		}
	}
	if newest != "" && newest < t.AddDate(0, 0, -1).Format(dayLayout) {
		// Today is more than a day past the newest file: the daemon was
		// stopped for days, or the clock jumped ahead (a wrong RTC before
		// NTP) and ages counted from it would remove days that are not
		// old. Only the byte bound applies now; the age rule, at the next
		// day's start.
		oldest = ""
	}
	var errs []error
	for _, f := range files {
		tooOld := f.Day < oldest
		tooBig := r.opts.MaxBytes > 0 && total > r.opts.MaxBytes
		if f.Day >= today || !tooOld && !tooBig {
			continue
		}
		if err := os.Remove(f.Path); err != nil {
			errs = append(errs, fmt.Errorf("prune history: %w", err))
			continue
		}
		total -= f.Size
	}
	return errors.Join(errs...)
}

// File is one day file of a history directory.
type File struct {
	Path       string
	Day        string // 2006-01-02, UTC
	Part       int    // 1, 2, … within the day
	Compressed bool
	Size       int64
}

// List returns the day files of dir, oldest first. A directory that does
// not exist has none.
func List(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read history directory: %w", err)
	}
	var files []File
	for _, e := range entries {
		name := e.Name()
		compressed := strings.HasSuffix(name, gzipExt)
		if !compressed && !strings.HasSuffix(name, plainExt) || !e.Type().IsRegular() {
			continue
		}
		day := name[:min(len(name), len(dayLayout))]
		if _, err := time.Parse(dayLayout, day); err != nil {
			continue
		}
		f := File{Path: filepath.Join(dir, name), Day: day, Part: partNumber(name), Compressed: compressed}
		if fi, err := e.Info(); err == nil {
			f.Size = fi.Size()
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b File) int {
		if c := strings.Compare(a.Day, b.Day); c != 0 {
			return c
		}
		return a.Part - b.Part
	})
	return files, nil
}

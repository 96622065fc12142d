package history

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// maxWarnings bounds the warnings a Source keeps; past it they are
// counted.
const maxWarnings = 20

// Source reads the records of a history directory between two times, one
// at a time and in time order (a trace.Source): a day of history at 1 Hz
// is a hundred thousand samples, and weeks of it are not held in memory.
// Lines that cannot be read (a torn last line, a line damaged by a crash of
// the machine) and records out of time order are skipped with a warning.
type Source struct {
	set      *state.Set
	from, to time.Time
	files    []File
	next     int // index in files of the next file to open

	f        io.Closer
	rd       *trace.Reader
	name     string
	lastErr  int // the line of the last error in the file being read
	last     time.Time
	warnings []string
	skipped  int // warnings past maxWarnings
}

var _ trace.Source = (*Source)(nil)

// Open returns the records of dir with from <= time < to (a zero to: up to
// the last), read with the signals of set (columns of other signals are
// ignored). It fails when dir cannot be read or has no day file in the
// period.
func Open(dir string, set *state.Set, from, to time.Time) (*Source, error) {
	all, err := List(dir)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no history in %s (is history.dir right, and has the daemon run?)", dir)
	}
	first, last := from.UTC().Format(dayLayout), "9999-12-31"
	if !to.IsZero() {
		last = to.UTC().Format(dayLayout)
	}
	s := &Source{set: set, from: from, to: to}
	for _, f := range all {
		if f.Day >= first && f.Day <= last {
			s.files = append(s.files, f)
		}
	}
	if len(s.files) == 0 {
		return nil, fmt.Errorf("no history in %s from %s (the files there run from %s to %s)",
			dir, first, all[0].Day, all[len(all)-1].Day)
	}
	return s, nil
}

// Files are the day files the source reads.
func (s *Source) Files() []File { return s.files }

// Skipped is how many lines or files were skipped so far.
func (s *Source) Skipped() int { return len(s.warnings) + s.skipped }

// Warnings are the lines skipped so far, located in their file.
func (s *Source) Warnings() []string {
	if s.skipped > 0 {
		return append(s.warnings[:len(s.warnings):len(s.warnings)], fmt.Sprintf("and %d more lines skipped", s.skipped))
	}
	return s.warnings
}

func (s *Source) warn(format string, args ...any) {
	if len(s.warnings) < maxWarnings {
		s.warnings = append(s.warnings, fmt.Sprintf(format, args...))
		return
	}
	s.skipped++
}

// Next returns the next record of the period, or io.EOF after the last.
func (s *Source) Next() (trace.Sample, error) {
	for {
		if s.rd == nil {
			if s.next == len(s.files) {
				return trace.Sample{}, io.EOF
			}
			if err := s.openNext(); err != nil {
				s.warn("%v", err)
				continue
			}
		}
		rec, err := s.rd.Next()
		switch {
		case err == io.EOF:
			s.closeFile()
			continue
		case err != nil:
			var te *trace.Error
			if !errors.As(err, &te) {
				s.warn("%s: %v", s.name, err)
				s.closeFile()
				continue
			}
			if te.Line == s.lastErr {
				// The reader is stuck at its end ("no samples after
				// the header"): the file is done.
				s.closeFile()
				continue
			}
			s.lastErr = te.Line
			s.warn("%s: %v", s.name, err)
			continue
		case rec.Recorded == nil:
			s.warn("%s: not a history file (no gear column)", s.name)
			s.closeFile()
			continue
		case !rec.Time.After(s.last):
			s.warn("%s: line %d: %s is not after the record before it", s.name, rec.Line, rec.Text)
			continue
		case rec.Time.Before(s.from):
			continue
		case !s.to.IsZero() && !rec.Time.Before(s.to):
			s.closeFile()
			s.next = len(s.files)
			return trace.Sample{}, io.EOF
		}
		s.last = rec.Time
		return rec, nil
	}
}

// Close closes the file being read.
func (s *Source) Close() error {
	s.closeFile()
	s.next = len(s.files)
	return nil
}

func (s *Source) closeFile() {
	if s.f != nil {
		s.f.Close()
	}
	s.f, s.rd, s.lastErr = nil, nil, 0
}

func (s *Source) openNext() error {
	f := s.files[s.next]
	s.next++
	s.name = f.Path
	file, err := os.Open(f.Path)
	if err != nil {
		return err
	}
	var in io.Reader = file
	if f.Compressed {
		zr, err := gzip.NewReader(bufio.NewReader(file))
		if err != nil {
			file.Close()
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		in = zr
	}
	rd, err := trace.NewReader(&completeLines{r: bufio.NewReader(in)}, s.set, 1, "recorded")
	if err != nil {
		file.Close()
		var te *trace.Error
		if errors.As(err, &te) && te.Line == 1 && f.Size == 0 {
			return fmt.Errorf("%s: empty", f.Path)
		}
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	s.f, s.rd = file, rd
	return nil
}

// completeLines passes r's lines through, and drops a last line that has
// no newline: a record torn by a crash or a full disk.
type completeLines struct {
	r    *bufio.Reader
	line []byte // what is left of the current line
	err  error
}

func (c *completeLines) Read(p []byte) (int, error) {
	for len(c.line) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			// A partial line at the end is torn: it is dropped.
			c.err = err
			if err != io.EOF {
				return 0, err
			}
			continue
		}
		c.line = line
	}
	n := copy(p, c.line)
	c.line = c.line[n:]
	return n, nil
}

// Collect reads every record of src into memory: for periods short enough
// to hold (a report's day, a status page's hours).
func Collect(src trace.Source) ([]trace.Sample, error) {
	var out []trace.Sample
	err := trace.Each(src, func(s trace.Sample) error {
		out = append(out, s)
		return nil
	})
	return out, err
}

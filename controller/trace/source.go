package trace

import (
	"errors"
	"io"

	"github.com/gearshift/gearshift/controller/state"
)

// Source yields the samples of a trace in order, then io.EOF. *Reader is one.
type Source interface {
	Next() (Sample, error)
}

// Samples is a Source of samples already in memory.
func Samples(ss []Sample) Source { return &slice{ss} }

type slice struct{ ss []Sample }

// Each calls fn with every sample of src, in order, and stops at the first
// error of either.
func Each(src Source, fn func(Sample) error) error {
	for {
		s, err := src.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(s); err != nil {
			return err
		}
	}
}

func (s *slice) Next() (Sample, error) {
	if len(s.ss) == 0 {
		return Sample{}, io.EOF
	}
	x := s.ss[0]
	s.ss = s.ss[1:]
	return x, nil
}

// Columns names the signals of set a trace can have a column for, in the
// order of the set.
func Columns(set *state.Set) []string {
	var ns []string
	for _, s := range set.All() {
		if s.Raw() {
			ns = append(ns, s.Name)
		}
	}
	return ns
}

package sensor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gearshift/gearshift/controller/state"
)

// maxInjectFile is the most an injected value's file may hold: a number
// and a newline, with room to spare.
const maxInjectFile = 4 << 10

// InjectFile reads a number that something else writes to a file (a
// fleet's monitoring pushing pressure; Envoy's injected_resource).
type InjectFile struct {
	Path string
}

// Number returns the file's number. A missing file is no value (nil), not an
// error: whoever writes it has not yet, or has withdrawn it. Anything but
// a regular file (a FIFO, a device, a directory) is an error, found without
// blocking: the open does not wait for a FIFO's writer.
func (f InjectFile) Number() (*float64, error) {
	fh, err := os.OpenFile(f.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read injected value: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("read injected value: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("injected value %s: not a regular file (%s); point sensor.inject_file at a file", f.Path, fileKind(st.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxInjectFile+1))
	if err != nil {
		return nil, fmt.Errorf("read injected value: %w", err)
	}
	if len(b) > maxInjectFile {
		return nil, fmt.Errorf("injected value %s: more than %d bytes; want one number", f.Path, maxInjectFile)
	}
	v, err := parseInjected(string(b))
	if err != nil {
		return nil, fmt.Errorf("injected value %s: %w", f.Path, err)
	}
	return &v, nil
}

// fileKind names what a non-regular file is, for the error.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "mode " + m.String()
	}
}

// parseInjected parses the file's text: one decimal number, white space
// around it allowed.
func parseInjected(text string) (float64, error) {
	s := strings.TrimSpace(text)
	if s == "" {
		return 0, errors.New("empty; want one number")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return v, nil
}

// Injected is the signal of the inject_file source.
const Injected = "injected"

var injectSource = Source{
	Name: "inject_file",
	Key:  "sensor.inject_file",
	Signals: []state.Signal{{
		// An operator's own figure: it counts as the backend's (with
		// sites, a neighbour climbs on it), as a Prometheus query does.
		Name: Injected, Direction: state.Rises, Precision: 2, Min: math.Inf(-1), Backend: true,
		Help:       "The number in sensor.inject_file.",
		Metric:     "gearshift_injected",
		StatusLine: "injected",
	}},
	On: on(func(cfg HostConfig) string { return cfg.Sensor.InjectFile }),
	Check: func(cfg HostConfig, problem func(key, format string, args ...any)) {
		if f := cfg.Sensor.InjectFile; f != "" && !filepath.IsAbs(f) {
			problem("sensor.inject_file", "must be an absolute path, got %q", f)
		}
	},
	Open: func(cfg HostConfig) (Reader, error) { return InjectFile{Path: cfg.Sensor.InjectFile}, nil },
}

// Read implements Reader: the file's number, nothing while there is no file.
func (f InjectFile) Read(context.Context) (func(*Sample), error) {
	v, err := f.Number()
	if err != nil || v == nil {
		return nil, err
	}
	return func(s *Sample) { s.Values[Injected] = *v }, nil
}

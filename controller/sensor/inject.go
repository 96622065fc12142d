package sensor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// maxInjectFile is the most an injected value's file may hold: a number
// and a newline, with room to spare.
const maxInjectFile = 4 << 10

// InjectFile reads a number that something else writes to a file (a
// fleet's monitoring pushing pressure; Envoy's injected_resource).
type InjectFile struct {
	Path string
}

// Read returns the file's number. A missing file is no value (nil), not an
// error: whoever writes it has not yet, or has withdrawn it. Anything but
// a regular file (a FIFO, a device, a directory) is an error, found without
// blocking: the open does not wait for a FIFO's writer.
func (f InjectFile) Read() (*float64, error) {
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

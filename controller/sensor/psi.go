package sensor

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// readPSI reads cpu, memory and io pressure from dir (normally
// /proc/pressure). A missing file, or a read failing with EOPNOTSUPP (PSI
// compiled in but disabled with psi=0), means the kernel has no PSI: nil,
// not an error.
func readPSI(dir string, readFile func(string) ([]byte, error)) (*PSI, error) {
	return readPressure(readFile, filepath.Join(dir, "cpu"), filepath.Join(dir, "memory"), filepath.Join(dir, "io"))
}

// readPressure reads three pressure files in the format of /proc/pressure,
// as readPSI does: a missing or disabled file means no PSI.
func readPressure(readFile func(string) ([]byte, error), cpu, memory, io string) (*PSI, error) {
	var p PSI
	for _, r := range []struct {
		path string
		some *float64
		full **float64
	}{
		{cpu, &p.CPUSome, &p.CPUFull},
		{memory, &p.MemorySome, &p.MemoryFull},
		{io, &p.IOSome, &p.IOFull},
	} {
		b, err := readFile(r.path)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read pressure: %w", err)
		}
		some, full, err := parsePSI(string(b))
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", r.path, err)
		}
		*r.some, *r.full = some, full
	}
	return &p, nil
}

// parsePSI parses one /proc/pressure file and returns its "some avg10" and,
// when the kernel printed that line, its "full avg10":
//
//	some avg10=1.53 avg60=0.87 avg300=0.28 total=38723581
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// Kernels before 5.13 print only the "some" line for cpu.
func parsePSI(text string) (some float64, full *float64, err error) {
	var haveSome bool
	for n, line := range strings.Split(strings.TrimSpace(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		kind := fields[0]
		if kind != "some" && kind != "full" {
			return 0, nil, fmt.Errorf("line %d: want \"some\" or \"full\", got %q", n+1, kind)
		}
		v, err := avg10(fields[1:])
		if err != nil {
			return 0, nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if kind == "some" {
			some, haveSome = v, true
		} else {
			full = &v
		}
	}
	if !haveSome {
		return 0, nil, errors.New(`no "some" line`)
	}
	return some, full, nil
}

func avg10(fields []string) (float64, error) {
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if ok && k == "avg10" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("avg10 %q is not a number", v)
			}
			return x, nil
		}
	}
	return 0, errors.New("no avg10 field")
}

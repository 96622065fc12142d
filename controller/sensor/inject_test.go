package sensor

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestInjectFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		want    *float64
		wantErr string
	}{
		{name: "a number", path: write("a", "42\n"), want: f(42)},
		{name: "white space and a fraction", path: write("b", "  \t0.75 \n\n"), want: f(0.75)},
		{name: "negative", path: write("c", "-3"), want: f(-3)},
		{name: "exponent", path: write("d", "1e3\n"), want: f(1000)},
		{name: "missing: no value", path: filepath.Join(dir, "missing"), want: nil},
		{name: "empty", path: write("e", "\n"), wantErr: "empty; want one number"},
		{name: "garbage", path: write("g", "high\n"), wantErr: `"high" is not a number`},
		{name: "two numbers", path: write("h", "1 2\n"), wantErr: `"1 2" is not a number`},
		{name: "NaN", path: write("i", "NaN\n"), wantErr: `"NaN" is not a number`},
		{name: "infinite", path: write("j", "+Inf\n"), wantErr: `"+Inf" is not a number`},
		{name: "too big", path: write("k", strings.Repeat("9", maxInjectFile+1)), wantErr: "more than 4096 bytes"},
		{name: "a directory", path: dir, wantErr: "not a regular file (a directory)"},
		{name: "a device", path: "/dev/null", wantErr: "not a regular file (a device)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InjectFile{Path: tc.path}.Number()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Read = %s, %v; want an error containing %q", fmtF(got), err, tc.wantErr)
				}
				return
			}
			if err != nil || !eqF(got, tc.want) {
				t.Errorf("Read = %s, %v; want %s", fmtF(got), err, fmtF(tc.want))
			}
		})
	}
}

// TestInjectFileFIFO: a FIFO at the path is refused at once, without
// waiting for a writer (a blocking open would hold the sample, and with it
// the loop, until the watchdog).
func TestInjectFileFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pressure")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	type result struct {
		v   *float64
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := InjectFile{Path: p}.Number()
		done <- result{v, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		// Release the blocked open so the test ends, then fail.
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("Read of a FIFO blocked waiting for a writer")
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "not a regular file (a FIFO)") {
		t.Fatalf("Read = %s, %v; want an error naming a FIFO", fmtF(r.v), r.err)
	}
}

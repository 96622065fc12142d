package logging

import (
	"bytes"
	"testing"
	"time"
)

// FuzzPrint feeds arbitrary lines to the log-line parser and the human
// formatter of `gearshift logs`: they must never panic, and what is printed
// is one line without a control byte, whatever the line held.
func FuzzPrint(f *testing.F) {
	for _, s := range []string{
		`{"level":"info","ts":1764558000.123,"msg":"state change","from":"light","to":"heavy","reason":"load_per_cpu 1.82 >= 1.50 for 3 samples","switch_ms":0.41}`,
		`{"level":"warn","ts":"2026-12-01T03:00:00.000Z","msg":"varnish unreachable","target":"127.0.0.1:6082","error":"i/o timeout"}`,
		`{"level":"warn","ts":0,"msg":"foreign vcl","active_vcl":"x\u001b[2J\u001b]0;owned\u0007"}`,
		`{"level":"info","ts":1e300,"msg":"m","n":null,"o":{"a":[1,2]},"b":true}`,
		`{"ts":-1e30,"msg":{"x":1},"level":7}`,
		"panic: runtime error\n\x1b[31m\xff",
		`{`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var out bytes.Buffer
		(&Formatter{W: &out, Loc: time.UTC}).Print(line)
		flt := Filter{Transitions: true, Since: time.Unix(1764558000, 0)}
		flt.Keep(line)
		if e, ok := ParseEntry(line); ok {
			e.Time()
		}
		got := out.Bytes()
		if len(got) == 0 || got[len(got)-1] != '\n' {
			t.Fatalf("%q: printed %q, want a line", line, got)
		}
		for _, c := range got[:len(got)-1] {
			if c < 0x20 || c == 0x7f {
				t.Fatalf("%q: printed %q with control byte %#x", line, got, c)
			}
		}
	})
}

package trace

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the trace reader: it must never
// panic; an error is an *Error naming a line of the input, and the
// samples of a trace it accepts are in time order with figures in range.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"time,load1\n0,1\n10,2\n",
		"\ufefftime,load1,cpus\n0,1,4\n1,2,8\n",
		"# sadf\n# hostname;interval;timestamp;runq-sz;plist-sz;ldavg-1;ldavg-5;ldavg-15;blocked\nh;60;2026-11-30 03:00:00 UTC;3;500;1.5;1.2;0.9;1\nh;60;2026-11-30 03:01:00 UTC;4;500;1.6;1.2;0.9;0\n",
		"time,load1,load5,load15,runnable,mem_available_pct,psi_cpu,psi_mem\n2026-11-30T03:00:00Z,1.5,1.2,0.9,3,41.5,12.5,0.5\n2026-11-30T03:00:01.5Z,1.6,1.2,0.9,4,41,13,0.6\n",
		"time,load1\n\"0\",\"1\"\n\"1\n\",2\n",
		"time,load1\n1e12,1\n1e13,1\n",
		"time,load1,cpus\n0,1,1e300\n",
		"time,load1,gear,site_gears,site_fetches\n0,1,light,blog=heavy shop=light:forced,default=3 blog=812 *=900\n1,1,light,,\n",
		"time,load1\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := Parse(bytes.NewReader(in), signals, 2, "from --cpus")
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || te.Line < 1 || te.Line > bytes.Count(in, []byte("\n"))+1 {
				t.Fatalf("%q: error %v (%T) names no line of the input", in, err, err)
			}
			return
		}
		if len(tr.Samples) == 0 {
			t.Fatalf("%q: accepted without samples", in)
		}
		for i, s := range tr.Samples {
			if s.Reading.CPUs < 1 || s.Reading.Load1 < 0 || s.Reading.RunQueue < 0 {
				t.Fatalf("%q: sample %d out of range: %+v", in, i, s.Reading)
			}
			if i > 0 && !s.Time.After(tr.Samples[i-1].Time) {
				t.Fatalf("%q: sample %d not after the one before", in, i)
			}
		}
	})
}

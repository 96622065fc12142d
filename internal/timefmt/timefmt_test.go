package timefmt

import (
	"testing"
	"time"
)

func TestDurationString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1s", 2 * time.Minute: "2m", time.Hour: "1h", 90 * time.Minute: "1h30m",
		100 * time.Millisecond: "100ms", 0: "0s", 61 * time.Second: "1m1s", 3*time.Hour + 5*time.Second: "3h0m5s",
	} {
		if got := Duration(d).String(); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

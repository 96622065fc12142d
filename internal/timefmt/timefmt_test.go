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

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 1400 * time.Millisecond: "1s", 2 * time.Minute: "120s", 59*time.Minute + 59*time.Second: "3599s", time.Hour: "1h0m0s",
	} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCoarse(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 45 * time.Second: "45s", 29*time.Minute + 30*time.Second: "29m30s",
		3*time.Hour + 5*time.Minute + 59*time.Second: "3h05m", 52 * time.Hour: "2d4h",
	} {
		if got := Coarse(d); got != want {
			t.Errorf("Coarse(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestOffset(t *testing.T) {
	if got := Offset(40*time.Minute + 400*time.Millisecond); got != "+0:40:00" {
		t.Errorf("Offset = %q", got)
	}
	if got := Offset(25*time.Hour + 61*time.Second); got != "+25:01:01" {
		t.Errorf("Offset = %q", got)
	}
}

func TestClock(t *testing.T) {
	now := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
	at := time.Date(2026, 11, 30, 16, 20, 32, 0, time.UTC)
	if got := Clock(at, now, false); got != "16:20" {
		t.Errorf("Clock today = %q", got)
	}
	if got := Clock(at, now, true); got != "16:20:32" {
		t.Errorf("Clock today with seconds = %q", got)
	}
	if got := Clock(at.AddDate(0, 0, 1), now, true); got != "2026-12-01 16:20" {
		t.Errorf("Clock tomorrow = %q", got)
	}
}

package config

import (
	"slices"
	"testing"
)

// The keys come out in one order, the order of the config file, however
// often they are asked for (they become log lines an operator compares).
func TestRestartKeysInConfigOrder(t *testing.T) {
	running := Default()
	next := Default()
	next.CPUs = 4
	next.Control.Socket = "/run/other.sock"
	next.Control.Group = "gearshift"
	next.Log.File = "/var/log/other.log"
	next.PIDFile = "/run/other.pid"
	next.MetricsListen = "127.0.0.1:9131"
	want := []string{"cpus", "control.socket", "control.group", "log.file", "pid_file", "metrics_listen"}
	for i := 0; i < 50; i++ {
		if got := RestartKeys(running, next); !slices.Equal(got, want) {
			t.Fatalf("run %d: RestartKeys = %v, want %v", i, got, want)
		}
	}
	if got := RestartKeys(running, Default()); len(got) != 0 {
		t.Errorf("unchanged config: RestartKeys = %v, want none", got)
	}
}

// The guest listener needs a restart when it is moved or turned on, not
// when guest pages are turned off (heavy stops asking at the reload).
func TestRestartKeysGuestListen(t *testing.T) {
	running, next := Default(), Default()
	next.Profiles.GuestListen = "127.0.0.1:7089"
	if got := RestartKeys(running, next); !slices.Equal(got, []string{"profiles.guest_listen"}) {
		t.Errorf("guest_listen moved: RestartKeys = %v, want [profiles.guest_listen]", got)
	}
	next.Profiles.GuestPages = "off"
	if got := RestartKeys(running, next); len(got) != 0 {
		t.Errorf("guest pages turned off: RestartKeys = %v, want none", got)
	}
	if got := RestartKeys(next, Default()); !slices.Equal(got, []string{"profiles.guest_listen"}) {
		t.Errorf("guest pages turned on: RestartKeys = %v, want [profiles.guest_listen]", got)
	}
}

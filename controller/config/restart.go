package config

import (
	"reflect"
	"slices"
)

// restartKeys are the settings bound at start, in the order of the config
// file, with how to tell that one changed.
var restartKeys = []struct {
	key     string
	changed func(running, next *Config) bool
}{
	{"cpus", func(r, n *Config) bool { return n.CPUs != r.CPUs }},
	// The sensor reads the traffic of the targets named at start.
	{"varnish.targets[].name", func(r, n *Config) bool {
		return !slices.Equal(n.SensorConfig().Varnish, r.SensorConfig().Varnish)
	}},
	{"sensor", func(r, n *Config) bool { return !reflect.DeepEqual(n.Sensor, r.Sensor) }},
	{"control.socket", func(r, n *Config) bool { return n.Control.Socket != r.Control.Socket }},
	{"control.group", func(r, n *Config) bool { return n.Control.Group != r.Control.Group }},
	{"control.admin_group", func(r, n *Config) bool { return n.Control.AdminGroup != r.Control.AdminGroup }},
	{"log.file", func(r, n *Config) bool { return n.Log.File != r.Log.File }},
	{"pid_file", func(r, n *Config) bool { return n.PIDFile != r.PIDFile }},
	{"metrics_listen", func(r, n *Config) bool { return n.MetricsListen != r.MetricsListen }},
	{"history", func(r, n *Config) bool { return n.History != r.History }},
	// The guest listener starts with the daemon (the profiles follow a
	// reload: off stops heavy asking at once).
	{"profiles.guest_listen", func(r, n *Config) bool {
		return n.Guests() && (!r.Guests() || n.Profiles.GuestListen != r.Profiles.GuestListen)
	}},
	// The sensor reads the pools of the sites named at start as theirs.
	{"sites[].phpfpm_pool", func(r, n *Config) bool { return !reflect.DeepEqual(n.sitePools(), r.sitePools()) }},
}

// RestartKeys returns the keys bound at start whose values differ between
// the running config and next, in the order of the config file: a reload
// cannot apply them, a restart does.
func RestartKeys(running, next *Config) []string {
	var keys []string
	for _, k := range restartKeys {
		if k.changed(running, next) {
			keys = append(keys, k.key)
		}
	}
	return keys
}

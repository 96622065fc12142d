package profiles

import "slices"

// RestartKeys returns the keys bound at start whose values differ between
// the running config and next: a reload cannot apply them, a restart does.
func RestartKeys(running, next *Config) []string {
	var keys []string
	for key, change := range map[string]bool{
		"control.socket": next.Control.Socket != running.Control.Socket,
		"control.group":  next.Control.Group != running.Control.Group,
		"log.file":       next.Log.File != running.Log.File,
		"pid_file":       next.PIDFile != running.PIDFile,
		"cpus":           next.CPUs != running.CPUs,
		"metrics_listen": next.MetricsListen != running.MetricsListen,
		"sensor":         next.Sensor != running.Sensor,
		// The sensor reads the traffic of the targets named at start.
		"varnish.targets[].name": !slices.Equal(next.SensorConfig().Varnish, running.SensorConfig().Varnish),
	} {
		if change {
			keys = append(keys, key)
		}
	}
	return keys
}

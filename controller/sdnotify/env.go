package sdnotify

import "strings"

// EnvNames are the variables through which systemd (or `gearshift start`)
// speaks to the daemon: the notify socket, the watchdog and socket
// activation. They are the daemon's alone; a process it starts (a hook, a
// detached daemon that gets its own) must not inherit them, or it could
// send READY=1 or WATCHDOG=1 in the daemon's name.
var EnvNames = []string{
	"NOTIFY_SOCKET",
	"WATCHDOG_USEC", "WATCHDOG_PID",
	"LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
}

// WithoutEnv returns env (KEY=value entries, as os.Environ gives them)
// without the entries named; env itself is left as it was.
func WithoutEnv(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// ChildEnv is env without EnvNames: the environment for a process the
// daemon starts.
func ChildEnv(env []string) []string { return WithoutEnv(env, EnvNames...) }

//go:build !race

package system

// raceEnabled: this test binary runs under the race detector, and so does
// the daemon it builds.
const raceEnabled = false

package controller

// Version is gearshift's release, reported by `gearshift version` and /v1/status.
// Release builds may set it with -ldflags "-X github.com/gearshift/gearshift/controller.Version=…".
var Version = "0.4.0"

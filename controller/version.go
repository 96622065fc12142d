package controller

// Version is gearshift's release, reported by `gearshift version` and /v1/status.
// Release builds may set it with -ldflags "-X github.com/gearshift/gearshift/controller.Version=…".
var Version = "0.2.0"

// Revision is the VCS commit gearshift was built from, for
// gearshift_build_info. A build that cannot record it itself (the .deb's,
// built with -buildvcs=false) sets it with -ldflags
// "-X github.com/gearshift/gearshift/controller.Revision=…"; empty, it is the
// revision go build recorded, or "unknown".
var Revision = ""

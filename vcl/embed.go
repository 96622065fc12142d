// Package vcl holds the VCL 4.1 templates of gearshift's three gears.
//
// common.vcl defines what every gear shares (backend, purge ACL, host
// normalisation, static objects, never-cached requests, hit-for-miss,
// headers); light.vcl, moderate.vcl and heavy.vcl add only what makes each
// gear different. They are Go text/templates rendered by package profiles.
package vcl

import "embed"

// FS holds common.vcl and the three gear templates.
//
//go:embed *.vcl
var FS embed.FS

// Common is the file name of the shared template every gear includes.
const Common = "common.vcl"

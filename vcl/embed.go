// Package vcl holds the VCL 4.1 templates of gearshift's three gears.
//
// common.vcl defines what every gear shares (backend, purge ACL, host
// normalisation, static objects, never-cached requests, hit-for-miss,
// headers), in parts by where a request is: common-recv.vcl (the
// request's way in), common-client.vcl (hash, hit, miss, pass, the
// client's budget), common-backend.vcl (the fetch and the backend's
// answer) and common-deliver.vcl (delivery, synthetic answers); light.vcl,
// moderate.vcl and heavy.vcl add only what makes each gear different.
// They are Go text/templates rendered by package profiles.
package vcl

import "embed"

// FS holds the common templates and the three gears'.
//
//go:embed *.vcl
var FS embed.FS

// Common matches the file names of the shared templates every gear
// includes: common.vcl and its parts.
const Common = "common*.vcl"

# gearshift, varnish.mode: label — hand requests to the current gear.
#
# gearshift keeps the VCL label "gearshift" pointed at the profile of the
# current gear (light, moderate or heavy) and never changes the active VCL:
# your default.vcl stays active, and `systemctl reload varnish`
# (varnishreload) keeps working. Copy this file next to your VCL
# (/etc/varnish/gearshift-label.vcl), then in /etc/varnish/default.vcl:
#
#     vcl 4.1;
#     include "gearshift-label.vcl";
#     ...
#     sub vcl_recv {
#         # what must stay yours first: redirects, bans, ACLs, other sites
#         call gearshift_recv;
#     }
#
# To hand over only some sites:
#
#         if (req.http.host ~ "(^|\.)example\.com(:[0-9]+)?$") {
#             call gearshift_recv;
#         }
#
# The gear's profile then handles the request from its own vcl_recv on,
# with the request as your vcl_recv left it, and its own backend
# (gearshift's backend.host and backend.port).
#
# A VCL that names the label compiles only once the label exists: start
# varnishd with the file `gearshift profiles export` writes (-f '' -I
# .../gearshift.cli, see docs/gears.md), which creates the label before it
# loads your VCL.

sub gearshift_recv {
	return (vcl(gearshift));
}

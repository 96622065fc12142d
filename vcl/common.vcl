{{- define "head" -}}
vcl 4.1;

# gearshift profile "{{.State}}": {{.Summary}}
# Rendered by gearshift from its configuration; change the config (or set
# profiles.{{.State}}.vcl_file to use your own program), not this text.

import std;
# proxy: what a TLS terminator told over PROXY protocol v2 (the scheme).
import proxy;
{{- if .PurgeACL}}
# purge: a PURGE marks a page stale (profiles.soft_purge) or removes it
# once a fetch under way has stored it.
import purge;
{{- end}}
{{- if .Modules}}
# varnish-modules: xkey drops the pages of a tag (a session's, a site's)
# without a ban; vsthrottle keeps each client's budget.
import xkey;
import vsthrottle;
{{- end}}

# The backend, twice, each with a connection limit: a fetch over it fails
# at once instead of queueing in front of PHP (backend.max_connections).
# A fetch for a page that has a stored copy to fall back on
# (stale_if_error: light's and moderate's fetches of what they keep for
# heavy) may take three quarters of the limit (gearshift_copies), so that
# such fetches never take the workers a logged-in visitor, a form or a
# page with no copy needs. With backend.session_reserve every anonymous
# fetch goes there, and its limit is max_connections less the reserve.
backend default {
    .host = "{{.BackendHost}}";
    .port = "{{.BackendPort}}";
    .max_connections = {{.MaxConnections}};
    .first_byte_timeout = {{.FirstByteTimeout}};
}

backend gearshift_copies {
    .host = "{{.BackendHost}}";
    .port = "{{.BackendPort}}";
    .max_connections = {{.CopyLimit}};
    .first_byte_timeout = {{.FirstByteTimeout}};
}
{{- if .SpareConnections}}

# Of the anonymous visitors' {{.CopyConnections}}, {{.SpareConnections}} that a refresh of a stored
# copy never takes: a page with no copy to fall back on is fetched here
# first, and on gearshift_copies when these are full (vcl_backend_fetch).
# In a surge's first second light's refreshes fill gearshift_copies (their
# visitors get the copy when refused); a page never fetched would get a
# 503 for every visitor who asks for it.
backend gearshift_spare {
    .host = "{{.BackendHost}}";
    .port = "{{.BackendPort}}";
    .max_connections = {{.SpareConnections}};
    .first_byte_timeout = {{.FirstByteTimeout}};
}
{{- end}}
{{- if .Probe}}

# The health probe (backend.probe) on a backend of its own that nothing is
# fetched from: a sick verdict makes the profiles serve stored copies at
# once, and never refuses a fetch the real backend could answer (a probe
# URL that redirects or needs a login takes no site down).
backend gearshift_probe {
    .host = "{{.BackendHost}}";
    .port = "{{.BackendPort}}";
    # Its requests carry User-Agent: gearshift-probe, for the access log
    # to leave out (docs/gears.md).
    .probe = {
        .request =
            "GET {{.Probe.URL}} HTTP/1.1"
            "Host: {{.Probe.Host}}"
            "User-Agent: gearshift-probe"
            "Connection: close";
        .interval = {{.Probe.Interval}};
        .timeout = {{.Probe.Timeout}};
        .window = {{.Probe.Window}};
        .threshold = {{.Probe.Threshold}};
    }
}
{{- end}}
{{- if .Guest}}

# The gearshift daemon (profiles.guest_pages): heavy asks it for an
# anonymous page that set a cookie the last time it was fetched, and for a
# guest copy past its TTL. The daemon fetches the page twice from the
# backend as two new visitors and answers with a copy, Set-Cookie removed,
# only when both were the same; otherwise (or when it cannot be reached)
# the page is fetched from the backend as without it.
backend gearshift_guest {
    .host = "{{.Guest.Host}}";
    .port = "{{.Guest.Port}}";
    .connect_timeout = 0.2s;
    .first_byte_timeout = {{.GuestTimeout}};
}
{{- end}}
{{- if .PurgeACL}}

# Clients allowed to PURGE and BAN (profiles.purge_acl).
acl gearshift_purgers {
{{- range .PurgeACL}}
    {{.}};
{{- end}}
}
{{- end}}
{{- if .TrustedProxies}}

# Proxies in front of Varnish whose X-Forwarded-For and X-Forwarded-Proto
# are believed (profiles.trusted_proxies): a TLS terminator, a CDN.
acl gearshift_trusted {
{{- range .TrustedProxies}}
    {{.}};
{{- end}}
}
{{- end}}
{{template "site-sub" .}}{{template "common-recv" .}}{{template "common-client" .}}{{template "common-backend" .}}{{template "common-deliver" .}}
{{- end}}

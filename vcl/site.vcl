{{/* how a request's site is told from its Host: the router hands it to the site's label, and each profile finds the site again (Varnish rolls the request back at the hand-over). */ -}}
{{define "site-route"}}
    # The Host the profile takes: an absolute-form target's authority
    # (RFC 9112), else the Host header; lower case, without its port or a
    # final dot. No Host at all is the default site's.
    if (req.url ~ "(?i)^https?://") {
        set req.http.X-Gs-Route = regsub(req.url, "(?i)^https?://([^/?]*).*$", "\1");
    } else {
        set req.http.X-Gs-Route = req.http.Host;
    }
    set req.http.X-Gs-Route = std.tolower(regsub(regsub(req.http.X-Gs-Route, ":[0-9]*$", ""), "\.$", ""));
{{- end}}

{{define "site-set"}}
        set req.http.X-Gs-Site = "{{.Site}}";
{{- if .Limit}}
        set req.http.X-Gs-Site-Limit = "{{.Limit}}";
        set req.http.X-Gs-Site-Flow = "{{.Flow}}";
{{- end}}
{{- if .Copies}}
        set req.http.X-Gs-Site-Copies = "{{.Copies}}";
        set req.http.X-Gs-Site-Copies-Flow = "{{.CopiesFlow}}";
{{- end}}
{{- end}}

{{define "site-sub"}}
{{- if .Sites}}

# The request's site (the config's sites, {{.Sites.Sites}} of them), as the
# router tells it: X-Gs-Site names it for the site's limits and its
# backend requests' record (vcl_backend_fetch).
sub gearshift_site {
{{- template "site-route"}}
{{- range .Sites.Exact}}
    if ({{.Cond}}) {
{{- template "site-set" .}}
        return;
    }
{{- end}}
{{- range .Sites.Globs}}
    if ({{.Cond}}) {
{{- template "site-set" .}}
        return;
    }
{{- end}}
{{- with .Sites.Default}}
{{- template "site-set" .}}
{{- end}}
}
{{- end}}
{{- end}}

{{- template "head" . }}

sub vcl_recv {
    call gearshift_recv;
{{- if .SessionRE}}
    if (req.http.Cookie ~ {"(^|;)\s*{{.SessionRE}}="}) {
        return (pass);
    }
{{- end}}
    # Anonymous: the remaining cookies (analytics and the like) would make
    # every page uncacheable.
    unset req.http.Cookie;
    return (hash);
}

sub vcl_backend_response {
    call gearshift_backend_response;
    # Cached exactly when the backend says so, with explicit freshness.
    if (beresp.ttl <= 0s ||
        beresp.http.Set-Cookie ||
        beresp.http.Surrogate-Control ~ "(?i)no-store" ||
        (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(private|no-cache|no-store)") ||
        (!beresp.http.Cache-Control ~ "(?i)(s-maxage|max-age)\s*=" && !beresp.http.Expires) ||
        beresp.http.Vary == "*") {
        call gearshift_hit_for_miss;
    }
    return (deliver);
}

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
    if (req.http.X-Gs-Refresh) {
        set req.hash_always_miss = true;
    }
    return (hash);
}

sub vcl_hit {
    # The heavy gear caches past what the backend allows, and keeps stale
    # copies longer: once out of heavy, such an object is fetched afresh
    # and the backend's answer replaces it.
    if (obj.http.X-Gs-Gear == "heavy" && req.restarts == 0) {
        set req.http.X-Gs-Refresh = "1";
        return (restart);
    }
}

sub vcl_backend_response {
    call gearshift_backend_response;
    if (beresp.status >= 500) {
        call gearshift_error_marker;
    }
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

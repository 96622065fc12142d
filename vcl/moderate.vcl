{{- template "head" . }}

sub vcl_recv {
    call gearshift_recv;
    if (req.http.X-Gs-Session) {
        set req.http.X-Gs-Reason = {{reason "session"}} + " " + {{cookieName "req.http.X-Gs-Session"}};
        return (pass);
    }
    # Anonymous: what cookies it has are harmless (analytics and the
    # like{{if .SessionRE}}, or not session cookies{{end}}) and would make every page
    # uncacheable.
    unset req.http.Cookie;
    if (req.http.X-Gs-Stale) {
        # The refresh failed: the copy, from gearshift_recv's grace.
    } else if (req.http.X-Gs-Refresh == "stale") {
        # A warm copy past its TTL: fetched again and replaced (the
        # lookup without grace hands it to the fetch), never served.
        set req.grace = 0s;
    } else if (req.http.X-Gs-Refresh) {
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
{{- if .StaleIfError}}
    if (obj.http.X-Gs-Grace && obj.ttl + std.duration(obj.http.X-Gs-Grace + "s", 0s) <= 0s && !req.http.X-Gs-Refresh) {
        # Past the grace the backend gave it: kept only for
        # stale_if_error, so fetched again (and replaced) first.
        set req.http.X-Gs-Refresh = "stale";
        set req.http.X-Gs-Copy = "1";
        return (restart);
    }
{{- end}}
{{- if .KeepWarm}}
    # A copy kept warm for heavy (profiles.keep_warm): this visitor gets
    # the backend's answer.
    if (obj.http.X-Gs-Gear == "warm") {
        set req.http.X-Gs-Copy = "1";
        if (obj.ttl <= 0s && !req.http.X-Gs-Refresh) {
            set req.http.X-Gs-Refresh = "stale";
            return (restart);
        }
        set req.http.X-Gs-Reason = {{reason "warm"}};
        return (pass);
    }
{{- end}}
}

sub vcl_backend_response {
    call gearshift_backend_response;
    if (beresp.status >= 500) {
        call gearshift_error_marker;
    }
    call gearshift_anonymous_set_cookie;
    call gearshift_never_share;
    call gearshift_moderate_store;
}

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
    call gearshift_anonymous_set_cookie;
    call gearshift_never_share;
    # Never cached when the backend says it must be revalidated.
    if (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)no-cache") {
        set bereq.http.X-Gs-Reason = {{reason "no_store"}} + " no-cache";
        call gearshift_hit_for_miss;
    }
    if (beresp.http.Cache-Control ~ "(?i)(s-maxage|max-age)\s*=" || beresp.http.Expires) {
        # Explicit freshness: exactly what it says (max-age=0 is none).
        if (beresp.ttl <= 0s) {
            set bereq.http.X-Gs-Reason = {{reason "no_store"}} + " max-age=0";
            call gearshift_hit_for_miss;
        }
        call gearshift_reason;
        return (deliver);
    }
{{- if .ModerateHeuristicTTL}}
    # No freshness information at all (a stock CMS page): a heuristic
    # freshness, profiles.moderate_heuristic_ttl, for the statuses HTTP
    # lets a cache give one (RFC 9111 section 4.2.2, RFC 9110 section 15.1).
    if (beresp.status == 200 || beresp.status == 203 || beresp.status == 204 ||
        beresp.status == 300 || beresp.status == 301 || beresp.status == 308 ||
        beresp.status == 404 || beresp.status == 405 || beresp.status == 410 ||
        beresp.status == 414) {
        set beresp.ttl = {{.ModerateHeuristicTTL}};
        call gearshift_reason;
        return (deliver);
    }
{{- end}}
    set bereq.http.X-Gs-Reason = {{reason "no_store"}} + " no-freshness";
    call gearshift_hit_for_miss;
}

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
        return (restart);
    }
{{- end}}
{{- if .KeepWarm}}
    # A copy kept warm for heavy (profiles.keep_warm): this visitor gets
    # the backend's answer.
    if (obj.http.X-Gs-Gear == "warm") {
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
    # Never cached when the backend says it must be revalidated.
    if (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)no-cache") {
        set bereq.http.X-Gs-Reason = {{reason "no_store"}} + " no-cache";
        call gearshift_not_moderate;
    }
    if (beresp.http.Cache-Control ~ "(?i)(s-maxage|max-age)\s*=" || beresp.http.Expires) {
        # Explicit freshness: exactly what it says (max-age=0 is none).
        if (beresp.ttl <= 0s) {
            set bereq.http.X-Gs-Reason = {{reason "no_store"}} + " max-age=0";
            call gearshift_not_moderate;
        }
        call gearshift_moderate_grace;
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
        call gearshift_moderate_grace;
        call gearshift_reason;
        return (deliver);
    }
{{- end}}
    set bereq.http.X-Gs-Reason = {{reason "no_store"}} + " no-freshness";
    call gearshift_not_moderate;
}

# A page moderate stores is kept for stale_if_error past the grace the
# backend gave it (X-Gs-Grace, seconds), which vcl_hit still honours.
sub gearshift_moderate_grace {
{{- if .StaleIfError}}
    if (beresp.grace < {{.StaleIfError}}) {
        set beresp.http.X-Gs-Grace = beresp.grace;
        set beresp.grace = {{.StaleIfError}};
    }
{{- end}}
}

# A response moderate's rules do not cache (the caller set the reason):
# kept warm for heavy when it would store it, else a hit-for-miss marker.
sub gearshift_not_moderate {
{{- if .KeepWarm}}
    call gearshift_keep_warm;
{{- end}}
    call gearshift_hit_for_miss;
}

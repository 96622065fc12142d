{{- template "head" . }}

sub vcl_recv {
    call gearshift_recv;
    if (req.http.X-Gs-Session) {
        # Cached per session (gearshift_recv put the key together); the
        # backend gets the cookies that count.
        set req.http.Cookie = req.http.X-Gs-Cookie;
        return (hash);
    }
    # Anonymous: every anonymous visitor gets the same page.
    unset req.http.Cookie;
{{- if .StaleIfError}}
    if (!req.http.X-Gs-Stale && !req.http.X-Gs-Sick) {
        # A copy is kept for stale_if_error ({{.CopyGrace}} of grace);
        # heavy serves it while it refreshes for heavy_grace alone.
        set req.grace = {{.HeavyGrace}};
    }
{{- end}}
    return (hash);
}

sub vcl_backend_response {
{{- if .Guest}}
    if (bereq.http.X-Gs-Guest == "ask") {
        call gearshift_guest_answer;
    }
{{- end}}
    call gearshift_backend_response;
    if (beresp.status >= 500) {
        call gearshift_error_marker;
    }
    # Forced TTLs only on what HTTP lets a cache keep: never a 401 or 403.
    call gearshift_forced_ttl_status;
    call gearshift_anonymous_set_cookie;
    call gearshift_never_share;
    if (bereq.http.Cookie) {
        # A session's page (private ones too): tagged with its session, so
        # that the session's next write drops it.
        {{sessionKey "bereq.http.X-Gs-Session" "bereq.http.Cookie"}}
        set beresp.http.X-Gs-Sid = {{sessionTag "bereq.http.X-Gs-Session"}};
{{- if .Modules}}
        set beresp.http.xkey = beresp.http.xkey + " gs-sid:" + beresp.http.X-Gs-Sid;
{{- end}}
        unset bereq.http.X-Gs-Session;
        if (beresp.ttl < {{.HeavySessionTTL}}) {
            set beresp.ttl = {{.HeavySessionTTL}};
        }
    } else {
        # Anonymous: whatever Cache-Control and Expires say about
        # freshness (no-cache, max-age=0, a past Expires).
        if (beresp.ttl < {{.HeavyMinTTL}}) {
            set beresp.ttl = {{.HeavyMinTTL}};
        }
    }
    if (bereq.http.Cookie) {
        set beresp.grace = {{.HeavyGrace}};
    } else {
        set beresp.grace = {{.CopyGrace}};
    }
    # Lets the lighter gears recognise what only heavy would cache.
    set beresp.http.X-Gs-Gear = "heavy";
    call gearshift_reason;
    return (deliver);
}


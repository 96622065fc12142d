{{- template "head" . }}

sub vcl_recv {
    call gearshift_recv;
{{- if .SessionRE}}
    if (req.http.Cookie ~ {"(^|;)\s*{{.SessionRE}}="}) {
        # Cached per session: the key holds the session cookies, name=value,
        # in the client's order, and nothing else. Separators are made
        # canonical first, so the marking below cannot be confused.
        set req.http.X-Gs-Session = regsuball(";" + req.http.Cookie, "[\s;]*;[\s;]*", ";");
        set req.http.X-Gs-Session = regsuball(req.http.X-Gs-Session, {";({{.SessionRE}}=)"}, "; \1");
        set req.http.X-Gs-Session = regsuball(req.http.X-Gs-Session, ";[^ ;][^;]*", "");
        set req.http.X-Gs-Session = regsuball(req.http.X-Gs-Session, "^[; ]+|[; ]+$", "");
        if (req.http.X-Gs-Session == "") {
            # Cannot happen; if it did, sharing a key would leak pages.
            return (pass);
        }
        return (hash);
    }
{{- end}}
    # Anonymous: every anonymous visitor gets the same page.
    unset req.http.Cookie;
    return (hash);
}

sub vcl_backend_response {
    call gearshift_backend_response;
    if (beresp.status >= 500) {
        if (bereq.is_bgfetch) {
            # Keep serving the stale copy.
            return (abandon);
        }
        call gearshift_error_marker;
    }
{{- if .SessionRE}}
    if (bereq.http.Cookie ~ {"(^|;)\s*{{.SessionRE}}="}) {
        # A session response that sets a cookie is never cached.
        if (beresp.http.Set-Cookie) {
            call gearshift_hit_for_miss;
        }
        if (beresp.ttl < {{.HeavySessionTTL}}) {
            set beresp.ttl = {{.HeavySessionTTL}};
        }
    } else {
{{- else}}
    {
{{- end}}
        # Anonymous: whatever Cache-Control and Expires say.
        unset beresp.http.Set-Cookie;
        if (beresp.ttl < {{.HeavyMinTTL}}) {
            set beresp.ttl = {{.HeavyMinTTL}};
        }
    }
    set beresp.grace = {{.HeavyGrace}};
    # Lets the lighter gears recognise what only heavy would cache.
    set beresp.http.X-Gs-Gear = "heavy";
    return (deliver);
}

sub vcl_backend_error {
    if (bereq.is_bgfetch) {
        # The backend is down: keep serving the stale copy.
        return (abandon);
    }
}

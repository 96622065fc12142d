{{- template "head" . }}

sub vcl_recv {
    call gearshift_recv;
    # Light load: only static objects come from the cache.
    set req.http.X-Gs-Reason = {{reason "light"}};
{{- if .KeepWarm}}
    if (!req.http.X-Gs-Session) {
        # An anonymous page is looked up all the same (profiles.keep_warm):
        # a copy, if any, is passed by vcl_hit, and a miss stores what the
        # backend answers for heavy to find when it starts. A copy past
        # its TTL is fetched again and replaced, never served stale here.
        unset req.http.Cookie;
        if (!req.http.X-Gs-Stale && !req.http.X-Gs-Sick) {
            set req.grace = 0s;
        }
        return (hash);
    }
{{- else if .StaleIfError}}
    if (req.http.X-Gs-Stale) {
        # The backend failed: a stored copy (stale_if_error).
        unset req.http.Cookie;
        return (hash);
    }
{{- end}}
    return (pass);
}
{{- if .KeepWarm}}

sub vcl_hit {
{{- if .StaticRE}}
    if (req.url ~ {"{{.StaticRE}}"}) {
        return (deliver);
    }
{{- end}}
    # A page's copy, stored for the other gears: light always gets the
    # backend's fresh answer, and falls back on the copy (stale_if_error).
    set req.http.X-Gs-Copy = "1";
    return (pass);
}

sub vcl_miss {
{{- if .StaticRE}}
    if (req.url !~ {"{{.StaticRE}}"}) {
        # A page: fetched for this visitor as light fetches every page,
        # and stored for the other gears on the way.
        set req.http.X-Gs-Cache = "PASS";
    }
{{- else}}
    set req.http.X-Gs-Cache = "PASS";
{{- end}}
}
{{- end}}

sub vcl_backend_response {
    call gearshift_backend_response;
    if (beresp.status >= 500) {
        call gearshift_error_marker;
    }
    call gearshift_anonymous_set_cookie;
    call gearshift_never_share;
{{- if .KeepWarm}}
    call gearshift_moderate_store;
{{- end}}
    call gearshift_hit_for_miss;
}

{{- template "head" . }}

sub vcl_recv {
    call gearshift_recv;
    # Light load: only static objects come from the cache.
    set req.http.X-Gs-Reason = {{reason "light"}};
    return (pass);
}

sub vcl_backend_response {
    call gearshift_backend_response;
    if (beresp.status >= 500) {
        call gearshift_error_marker;
    }
    call gearshift_anonymous_set_cookie;
    call gearshift_never_share;
    call gearshift_hit_for_miss;
}

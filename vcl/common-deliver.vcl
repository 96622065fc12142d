{{/* the answer, shared by every gear: vcl_deliver and vcl_synth. Included by common.vcl's head. */ -}}
{{define "common-deliver"}}
sub vcl_deliver {
{{- if .Budget}}
    call gearshift_landed;
{{- end}}
{{- if .SiteLimits}}
    call gearshift_site_landed;
{{- end}}
{{- if .StaleIfError}}
    call gearshift_stale_if_error;
{{- end}}
    if (req.http.X-Gs-Drop) {
        # The session's write is done: its cached pages go, so its next
        # request sees what it wrote (read-your-own-writes).
{{- if .Modules}}
        # Its pages carry the tag gs-sid:<session>: dropped at the cost of
        # their number, with no ban for every later lookup to test.
        set req.http.X-Gs-Drop = xkey.purge("gs-sid:" + req.http.X-Gs-Drop);
{{- else}}
        if (!std.ban("obj.http.X-Gs-Sid == " + req.http.X-Gs-Drop)) {
            std.log("gearshift: session ban refused: " + std.ban_error());
        }
{{- end}}
        unset req.http.X-Gs-Drop;
    }
    unset resp.http.X-Gs-Url;
    unset resp.http.X-Gs-Host;
    unset resp.http.X-Gs-Gear;
    unset resp.http.X-Gs-Sid;
    unset resp.http.X-Gs-Grace;
    unset resp.http.X-Gs-Guest;
    unset resp.http.xkey;
{{- if .ExposeHeaders}}
    set resp.http.X-Gearshift-Profile = "{{.State}}";
    if (req.http.X-Gs-Cache) {
        set resp.http.X-Cache = req.http.X-Gs-Cache;
    } else {
        set resp.http.X-Cache = "PASS";
    }
{{- end}}
}

sub vcl_synth {
{{- if .Budget}}
    call gearshift_landed;
{{- end}}
{{- if .SiteLimits}}
    call gearshift_site_landed;
{{- end}}
{{- if .StaleIfError}}
    call gearshift_stale_if_error;
{{- end}}
{{- if .ExposeHeaders}}
    set resp.http.X-Gearshift-Profile = "{{.State}}";
    set resp.http.X-Cache = "PASS";
{{- end}}
{{- if .Budget}}
    if (resp.status == 429 && req.http.X-Gs-Over) {
        # Answered here: Varnish's own vcl_synth would say to come back
        # in 5 s.
        set resp.http.Retry-After = "{{.Budget.Retry}}";
        set resp.http.Content-Type = "text/plain; charset=utf-8";
        set resp.body = "Too many requests: try again in {{.Budget.Retry}} s." + {"
"};
        return (deliver);
    }
{{- end}}
}
{{- end}}

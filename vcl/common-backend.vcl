{{/* the backend's side, shared by every gear: the fetch, its errors and the backend's answer (what is stored, for how long). Included by common.vcl's head. */ -}}
{{define "common-backend"}}
sub vcl_backend_fetch {
    unset bereq.http.X-Gs-Cache;
    unset bereq.http.X-Gs-Session;
    unset bereq.http.X-Gs-Host;
    unset bereq.http.X-Gs-Refresh;
    unset bereq.http.X-Gs-Path;
    unset bereq.http.X-Gs-Drop;
    unset bereq.http.X-Gs-Cookie;
    unset bereq.http.X-Gs-Stripped;
    unset bereq.http.X-Gs-Anon;
    unset bereq.http.X-Gs-Stale;
    unset bereq.http.X-Gs-Sick;
    unset bereq.http.X-Gs-Budget;
    unset bereq.http.X-Gs-Over;
    unset bereq.http.X-Gs-Flight;
    unset bereq.http.X-Gs-Tags;
    # The refresh of a stored copy asks for the page whole. Varnish would
    # revalidate with the copy's Last-Modified, which counts seconds: a
    # page changed within the second it was fetched (a publish right after
    # a refresh, then its PURGE) would be answered 304, and the old copy
    # kept for another TTL. An ETag names a version exactly, and stays.
    if (!bereq.uncacheable) {
        unset bereq.http.If-Modified-Since;
    }
{{- if .Sites}}
    # The site's backend request, for its share of the backend (the
    # daemon reads these records: status sites backend_rps).
    std.log("{{.FetchLog}}" + bereq.http.X-Gs-Site);
{{- end}}
    unset bereq.http.X-Gs-Site;
    unset bereq.http.X-Gs-Route;
    unset bereq.http.X-Gs-Site-Limit;
    unset bereq.http.X-Gs-Site-Flow;
    unset bereq.http.X-Gs-Held;
    unset bereq.http.X-Gs-Held-Anon;
    unset bereq.http.X-Gs-Held-Copy;
    unset bereq.http.X-Gs-Site-Copies;
    unset bereq.http.X-Gs-Site-Copies-Flow;
{{- if .Probe}}
    if (bereq.http.X-Gs-Copy && !std.healthy(gearshift_probe)) {
        # A page with a copy to fall back on, and the probe finds the
        # backend sick: the visitor waits the probe's timeout at most, not
        # first_byte_timeout. A probe that is wrong (a URL that redirects)
        # costs nothing: a backend that answers is answered.
        set bereq.connect_timeout = {{.Probe.Timeout}};
        set bereq.first_byte_timeout = {{.Probe.Timeout}};
    }
{{- end}}
    if (bereq.http.X-Gs-Copy{{if .SessionReserve}} || bereq.http.X-Gs-Anon-Fetch{{end}}) {
        set bereq.backend = gearshift_copies;
    }
{{- if .SpareConnections}}
    if (bereq.http.X-Gs-Anon-Fetch && !bereq.http.X-Gs-Copy && !bereq.uncacheable && !bereq.is_bgfetch) {
        # A page with no stored copy to fall back on: the spare
        # connections first, which no refresh of a copy takes;
        # gearshift_copies once they are full (vcl_backend_error).
        set bereq.backend = gearshift_spare;
    } else if (bereq.retries > 0 && bereq.backend == gearshift_spare) {
        set bereq.backend = gearshift_copies;
    }
{{- end}}
    unset bereq.http.X-Gs-Copy;
    unset bereq.http.X-Gs-Anon-Fetch;
{{- if .Guest}}
    if (bereq.http.X-Gs-Guest == "ask") {
        # The daemon said no, or could not be reached: the backend.
        set bereq.http.X-Gs-Guest = "asked";
{{- if .SessionReserve}}
        # An anonymous page (no cookie): the anonymous visitors' share.
        set bereq.backend = gearshift_copies;
{{- else}}
        set bereq.backend = default;
{{- end}}
    } else if (!bereq.uncacheable && !bereq.http.Cookie && (bereq.is_hitmiss || bereq.http.X-Gs-Guest == "copy")) {
        # An anonymous page that set a cookie last time, or a guest
        # copy to refresh: the daemon's check first.
        # The client the daemon budgets its checks by (X-Gs-Client, of
        # gearshift_client) goes with the ask, and only there.
        set bereq.http.X-Gs-Guest = "ask";
        set bereq.backend = gearshift_guest;
    } else {
        unset bereq.http.X-Gs-Guest;
    }
    if (bereq.http.X-Gs-Guest != "ask") {
        unset bereq.http.X-Gs-Client;
    }
{{- else}}
    unset bereq.http.X-Gs-Client;
{{- end}}
    if (bereq.uncacheable) {
        # A pass: the client side said why (gearshift_recv, a gear's
        # vcl_recv). A fetch for the cache says it once answered: see
        # gearshift_reason.
        {{logReason "bereq.http.X-Gs-Reason"}}
    }
    unset bereq.http.X-Gs-Reason;
}

# Logs why this fetch for the cache reached the backend, once, as
# vcl_backend_response or vcl_backend_error ends: the word a decision set
# in bereq.http.X-Gs-Reason when the response cannot be cached (so the
# marker's later fetches say why too), else why the cache had no copy.
sub gearshift_reason {
    if (!bereq.http.X-Gs-Reason) {
        if (bereq.http.Cookie) {
            # Only heavy looks up a request with cookies: a session's copy.
            {{sessionKey "bereq.http.X-Gs-Reason" "bereq.http.Cookie"}}
            set bereq.http.X-Gs-Reason = {{reason "session"}} + " " + {{cookieName "bereq.http.X-Gs-Reason"}};
        } else if (bereq.is_bgfetch) {
            set bereq.http.X-Gs-Reason = {{reason "expired"}};
        } else if (bereq.is_hitmiss) {
            set bereq.http.X-Gs-Reason = {{reason "hit_for_miss"}};
{{- if .StaticRE}}
        } else if (bereq.url ~ {"{{.StaticRE}}"}) {
            set bereq.http.X-Gs-Reason = {{reason "static_miss"}};
{{- end}}
        } else {
            set bereq.http.X-Gs-Reason = {{reason "miss"}};
        }
    }
    {{logReason "bereq.http.X-Gs-Reason"}}
}

sub vcl_backend_error {
{{- if .Guest}}
    if (bereq.http.X-Gs-Guest == "ask") {
        # The daemon cannot be reached: the backend, at once.
        std.log("{{.GuestNoLog}}");
        return (retry);
    }
{{- end}}
{{- if .SpareConnections}}
    if (bereq.backend == gearshift_spare && bereq.retries == 0 && now - bereq.time < 1s) {
        # The spare connections were full (refused at once): the rest
        # of the anonymous visitors' share, gearshift_copies.
        return (retry);
    }
{{- end}}
    if (!bereq.uncacheable) {
        call gearshift_reason;
        if (bereq.is_bgfetch) {
            # Keep serving the stale copy.
            return (abandon);
        }
{{- if .StaleIfError}}
        if (!bereq.http.Cookie) {
            # An anonymous fetch for the cache that failed (refused,
            # timed out, over max_connections): abandoned, so that the
            # copy it would have replaced stays for vcl_synth to serve.
            return (abandon);
        }
{{- end}}
    }
}

{{- if or .StaticRE (eq .State "heavy") .KeepWarm}}

# Statuses a cache may keep without explicit freshness (RFC 9110 section
# 15.1 and Varnish's own list): only these get a TTL gearshift chooses.
sub gearshift_forced_ttl_status {
    if (beresp.status != 200 && beresp.status != 203 && beresp.status != 300 &&
        beresp.status != 301 && beresp.status != 302 && beresp.status != 304 &&
        beresp.status != 307 && beresp.status != 404 && beresp.status != 410 &&
        beresp.status != 414) {
        set bereq.http.X-Gs-Reason = {{reason "uncacheable_status"}} + " status=" + beresp.status;
        call gearshift_hit_for_miss;
    }
}
{{- end}}

# Uncacheable responses become hit-for-miss objects: requests for them are
# never queued behind one another, and a later cacheable response replaces
# the marker. The caller sets the reason (bereq.http.X-Gs-Reason). The
# refresh of an anonymous copy (a background fetch) answered so (a 4xx, a
# Set-Cookie) is abandoned instead, as for a 5xx: the good copy stays and
# is served through its grace, where a marker would send every visitor to
# the backend for two minutes. Not a guest copy's refresh the daemon
# found private (X-Gs-Guest: asked): its verdict ends the sharing.
sub gearshift_hit_for_miss {
    call gearshift_reason;
    if (bereq.is_bgfetch && !bereq.http.Cookie && bereq.http.X-Gs-Guest != "asked") {
        return (abandon);
    }
    set beresp.uncacheable = true;
    set beresp.ttl = 120s;
    set beresp.grace = 0s;
    return (deliver);
}

{{- if and .KeepWarm (ne .State "heavy")}}

# keep_warm: an anonymous response that heavy would store is stored as
# heavy would store it, marked for heavy alone (X-Gs-Gear "warm"): light
# and moderate pass the copy, heavy serves it from its first request, and
# stale_if_error serves it when the backend fails. The caller has sent
# what is never shared to gearshift_hit_for_miss.
sub gearshift_keep_warm {
    call gearshift_forced_ttl_status;
    if (beresp.ttl < {{.HeavyMinTTL}}) {
        set beresp.ttl = {{.HeavyMinTTL}};
    }
    set beresp.grace = {{.CopyGrace}};
    set beresp.http.X-Gs-Gear = "warm";
    call gearshift_reason;
    return (deliver);
}
{{- end}}

{{- if or (eq .State "moderate") (and .KeepWarm (eq .State "light"))}}

# Moderate's rules for an anonymous response that may be shared: stored
# exactly as the backend's caching headers say (and for
# moderate_heuristic_ttl when they say nothing). Light applies them too
# (keep_warm), so that moderate finds what it would have stored; what
# they refuse goes to gearshift_not_moderate.
sub gearshift_moderate_store {
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
{{- end}}

# A 5xx with no stale copy to keep leaves a short hit-for-miss marker: not
# cached as content, and within seconds requests queue behind a single
# fetch again. A long marker would send every request for the URL to a
# struggling backend at once, uncoalesced, for its whole TTL.
sub gearshift_error_marker {
    set bereq.http.X-Gs-Reason = {{reason "uncacheable_status"}} + " status=" + beresp.status;
    call gearshift_reason;
    set beresp.uncacheable = true;
    set beresp.ttl = 5s;
    set beresp.grace = 0s;
    return (deliver);
}

# What is never shared, in any gear (docs/gears.md, "What is never shared"): it
# returns only for a response that may be cached, anonymous or for its
# session. A request is a session's when its fetch carries cookies (the
# gears remove them from anonymous requests before the cache).
sub gearshift_never_share {
    call gearshift_no_store;
    if (beresp.http.Vary == "*") {
        set bereq.http.X-Gs-Reason = {{reason "no_store"}} + " vary=*";
        call gearshift_hit_for_miss;
    }
    if (bereq.http.Cookie) {
        # A session's response that sets a cookie changes the session.
        if (beresp.http.Set-Cookie) {
            set bereq.http.X-Gs-Reason = {{reason "set_cookie"}} + " " + {{cookieName "beresp.http.Set-Cookie"}};
            call gearshift_hit_for_miss;
        }
    } else if (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])private\b") {
        # For one user: an anonymous copy would be everyone's.
        set bereq.http.X-Gs-Reason = {{reason "private"}};
        call gearshift_hit_for_miss;
    }
}

# The backend says a cache must not store it: no-store in Surrogate-Control,
# or in Cache-Control when there is no Surrogate-Control.
sub gearshift_no_store {
    if (beresp.http.Surrogate-Control ~ "(?i)(^|[,\s])no-store\b" ||
        (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])no-store\b")) {
        if (!bereq.http.X-Gs-Stripped) {
            set bereq.http.X-Gs-Reason = {{reason "no_store"}};
            call gearshift_hit_for_miss;
        }
    }
}

# An anonymous response that sets a cookie starts a session (a login form's
# CSRF token, a cart): it goes to that visitor alone, Set-Cookie and all.
# In heavy, a response whose cookies are all harmless (ignore_cookies) or
# given up by the operator (strip_set_cookies) loses them and is shared;
# see gearshift_strip_set_cookies.
sub gearshift_anonymous_set_cookie {
    if (!bereq.http.Cookie && beresp.http.Set-Cookie) {
{{- if and (eq .State "heavy") .StripRE}}
        call gearshift_strip_set_cookies;
{{- end}}
        if (beresp.http.Set-Cookie) {
            set bereq.http.X-Gs-Reason = {{reason "set_cookie"}} + " " + {{cookieName "beresp.http.Set-Cookie"}};
            call gearshift_hit_for_miss;
        }
    }
}
{{- if and (eq .State "heavy") .StripRE}}

# Removes the response's Set-Cookie headers when every one of them sets a
# cookie that may be stripped, and only from a response heavy then
# stores: one it passes anyway (private, Vary: *, no-store without the
# opt-in) keeps its cookies, or its visitor would lose the session for no
# caching gain (a login form would fail). VCL sees only the first of
# several headers, so they are joined to be read; when one of them must
# stay, the joined header cannot be sent, and the object is fetched again
# (X-Gs-Unstripped) to go to its visitor as it came.
sub gearshift_strip_set_cookies {
    if (bereq.http.X-Gs-Unstripped || beresp.http.Set-Cookie !~ {"^\s*{{.StripRE}}="}) {
        return;
    }
    if (beresp.http.Vary == "*" ||
        (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])private\b") ||
        beresp.http.Surrogate-Control ~ "(?i)(^|[,\s])no-store\b"{{if not .StripOptIn}} ||
        (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])no-store\b"){{end}}) {
        return;
    }
    std.collect(beresp.http.Set-Cookie, {"
"});
    if (beresp.http.Set-Cookie ~ {"(^|\n)\s*+(?!{{.StripRE}}=)"}) {
        set bereq.http.X-Gs-Unstripped = "1";
        return (retry);
    }
    unset beresp.http.Set-Cookie;
{{- if .StripOptIn}}
    # The operator's word (strip_set_cookies) that the session such a
    # response starts carries nothing: its no-store (PHP's
    # session_start()) goes with the cookie.
    set bereq.http.X-Gs-Stripped = "1";
{{- end}}
}
{{- end}}

# For BAN and PURGE: lets the ban lurker match objects without a request.
sub gearshift_ban_fields {
    # The backend's tags, xkey and Surrogate-Key, in one xkey header: what
    # xkey indexes, and what a ban on tags matches without it.
    std.collect(beresp.http.xkey, " ");
    if (beresp.http.Surrogate-Key) {
        set beresp.http.xkey = beresp.http.xkey + " " + beresp.http.Surrogate-Key;
    }
    {{keyURL "beresp.http.X-Gs-Url" "bereq.url" "    "}}
{{- if .NormalizeHost}}
    set beresp.http.X-Gs-Host = {{hostKey "bereq.http.Host"}};
{{- else}}
    set beresp.http.X-Gs-Host = bereq.http.Host;
{{- end}}
}
{{- if .Guest}}

# The daemon's answer to heavy's ask: a copy it found the same for two new
# visitors is stored for every anonymous visitor, as heavy stores a page,
# marked X-Gs-Guest so that its refresh asks the daemon again (and the
# lighter gears never serve it: X-Gs-Gear "heavy"); a no is fetched from
# the backend instead.
sub gearshift_guest_answer {
    # Only this daemon's answers count: they carry the secret it made at
    # its start, which no ask carries, so a process that took the
    # daemon's address (an impostor, a second gearshift) cannot echo it.
    if (beresp.status != 200 || beresp.http.X-Gs-Guest != "shared" ||
        beresp.http.{{.GuestSecretHeader}} != {{.Guest.Secret}}) {
        unset beresp.http.{{.GuestSecretHeader}};
        # Not a backend request: readers of the reason log leave it out.
        std.log("{{.GuestNoLog}}");
        return (retry);
    }
    unset beresp.http.{{.GuestSecretHeader}};
    unset beresp.http.Set-Cookie;
    call gearshift_ban_fields;
    set beresp.http.X-Gs-Guest = "1";
    set beresp.http.X-Gs-Gear = "heavy";
    set beresp.ttl = {{.HeavyMinTTL}};
    set beresp.grace = {{.HeavyGrace}};
    set bereq.http.X-Gs-Reason = {{reason "guest"}};
    call gearshift_reason;
    return (deliver);
}
{{- end}}

# Shared by every gear: passes, static objects, and redirects that would
# loop once cached. A gear's vcl_backend_response handles the rest.
sub gearshift_backend_response {
    if (bereq.uncacheable) {
        return (deliver);
    }
    if (beresp.status >= 500 && bereq.is_bgfetch) {
        # Keep serving the stale copy.
        set bereq.http.X-Gs-Reason = {{reason "uncacheable_status"}} + " status=" + beresp.status;
        call gearshift_reason;
        return (abandon);
    }
    call gearshift_ban_fields;
{{- if .StaticRE}}

    if (bereq.url ~ {"{{.StaticRE}}"}) {
        if (beresp.status >= 500) {
            call gearshift_error_marker;
        }
        call gearshift_forced_ttl_status;
        call gearshift_no_store;
        # The same file for everyone: a cookie it would set is dropped.
        unset beresp.http.Set-Cookie;
        set beresp.ttl = {{.StaticTTL}};
        call gearshift_reason;
        return (deliver);
    }
{{- end}}
{{- if .NormalizeHost}}

    # www.example.com, example.com and example.com:8081 share a cache key:
    # a redirect from one to another, cached, would send the client round
    # in circles; and a redirect that names the site with the port or the
    # name the visitor sent ("Host: example.com:31337", which the backend
    # sees as sent) would send every visitor of the key there. A redirect
    # within the site is shared only when it names the site as the key
    # does (or by path alone).
    if (beresp.status >= 300 && beresp.status < 400 && beresp.http.Location ~ "^([a-zA-Z][a-zA-Z0-9+.-]*:)?//") {
        set beresp.http.X-Gs-Location = std.tolower(regsub(beresp.http.Location, "^[^/]*//([^/?#]*).*$", "\1"));
        if ({{hostKey "beresp.http.X-Gs-Location"}} == beresp.http.X-Gs-Host &&
            (beresp.http.X-Gs-Location != std.tolower(bereq.http.Host) || beresp.http.X-Gs-Location != beresp.http.X-Gs-Host)) {
            unset beresp.http.X-Gs-Location;
            set bereq.http.X-Gs-Reason = {{reason "uncacheable_status"}} + " status=" + beresp.status;
            call gearshift_hit_for_miss;
        }
        unset beresp.http.X-Gs-Location;
    }
{{- end}}
{{- if .StaleIfError}}
    if (beresp.status >= 500 && !bereq.http.Cookie) {
        # An anonymous page's error: abandoned, so that the copy it would
        # replace stays for vcl_synth to serve (stale_if_error); a 5xx is
        # never stored as the page.
        set bereq.http.X-Gs-Reason = {{reason "uncacheable_status"}} + " status=" + beresp.status;
        call gearshift_reason;
        return (abandon);
    }
{{- end}}
}
{{end}}

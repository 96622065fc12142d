{{/* the client's side, shared by every gear: stale-if-error, the client's budget, pipe, hash, hit, miss and pass. Included by common.vcl's head. */ -}}
{{define "common-client"}}{{- if .StaleIfError}}
# An anonymous page the backend failed (a 5xx passed through, or the
# synthetic 503 of a fetch abandoned above) is asked for again, once, from
# the cache alone: vcl_hit serves a copy younger than stale_if_error,
# vcl_miss and vcl_pass answer 503 without a second backend request.
sub gearshift_stale_if_error {
    if (resp.status >= 500 && req.http.X-Gs-Anon && !req.http.X-Gs-Stale && req.restarts < 2) {
        set req.http.X-Gs-Stale = "1";
        return (restart);
    }
}

# Asked for again from the cache alone, and no copy there: the error that
# sent it, or 429 for a client over its budget.
sub gearshift_no_copy {
{{- if .Budget}}
    if (req.http.X-Gs-Over) {
        return (synth(429, "Too Many Requests"));
    }
{{- end}}
    return (synth(503, "Backend fetch failed"));
}

{{ end -}}
{{- if .Budget}}
# The client a budget counts (profiles.client_budget): the peer, or, from
# a proxy of trusted_proxies, the address that proxy got the request from
# (X-Forwarded-For, right to left: Varnish appended the peer itself,
# and what a visitor wrote on the left is never reached while a proxy's
# entry follows it). Four proxies deep at most. A client of purge_acl
# has no budget: X-Gs-Client is left unset.
sub gearshift_client {
    set req.http.X-Gs-Client = client.ip;
{{- if .TrustedProxies}}
    if (client.ip ~ gearshift_trusted) {
        set req.http.X-Gs-Hops = regsub(req.http.X-Forwarded-For, "\s*,?[^,]*$", "");
{{- range $i := .Hops}}
        if (req.http.X-Gs-Hops ~ "[^\s,]" && std.ip(req.http.X-Gs-Client, "0.0.0.0", false) ~ gearshift_trusted) {
            set req.http.X-Gs-Client = regsub(req.http.X-Gs-Hops, "^(?:.*,)?\s*([^,\s]*)\s*$", "\1");
            set req.http.X-Gs-Hops = regsub(req.http.X-Gs-Hops, "\s*,?[^,]*$", "");
        }
{{- end}}
        unset req.http.X-Gs-Hops;
    }
{{- end}}
{{- if .PurgeACL}}
    if (std.ip(req.http.X-Gs-Client, "0.0.0.0", false) ~ gearshift_purgers) {
        unset req.http.X-Gs-Client;
    }
{{- end}}
    if (req.http.X-Gs-Client ~ ":") {
        # An IPv6 client is its /64: one host or one home holds a whole
        # /64, and would otherwise have a budget per address. The address
        # is written out in full ("::" expanded) to cut its first four
        # groups. Varnish writes an IPv4-mapped one as its IPv4 address.
        set req.http.X-Gs-Client = "" + std.ip(req.http.X-Gs-Client, "::", false);
        if (req.http.X-Gs-Client ~ ":") {
            if (req.http.X-Gs-Client ~ "^::") {
                set req.http.X-Gs-Client = "0" + req.http.X-Gs-Client;
            }
            if (req.http.X-Gs-Client ~ "::$") {
                set req.http.X-Gs-Client = req.http.X-Gs-Client + "0";
            }
{{- range $i := .ExpandSteps}}
            if (req.http.X-Gs-Client ~ "::" && req.http.X-Gs-Client !~ "^([^:]*:){8}") {
                set req.http.X-Gs-Client = regsub(req.http.X-Gs-Client, "::", ":0::");
            }
{{- end}}
            set req.http.X-Gs-Client = regsub(regsub(req.http.X-Gs-Client, "::", ":"), "^(([^:]*:){3}[^:]*).*$", "\1") + "::/64";
        }
    }
}

# A miss or a pass costs the backend a request: a client over its budget
# gets a stored copy when there is one (asked for again from the cache
# alone, as for stale_if_error), else 429 with Retry-After. Counted once
# per request, whatever its restarts. Nor may one client hold more than
# {{.Budget.InFlight}} of the backend's connections at once (half of
# backend.max_connections): a request in flight holds a token of its
# own bucket until its answer comes (gearshift_landed); a token lost on
# the way comes back within {{.Budget.FlightPeriod}}.
sub gearshift_budget {
    if (req.http.X-Gs-Client && !req.http.X-Gs-Budget) {
        set req.http.X-Gs-Budget = "1";
        if (vsthrottle.is_denied("gearshift:" + req.http.X-Gs-Client, {{.Budget.Limit}}, {{.Budget.Period}})) {
            set req.http.X-Gs-Over = "client=" + req.http.X-Gs-Client;
        } elsif (vsthrottle.is_denied("gearshift-flight:" + req.http.X-Gs-Client, {{.Budget.InFlight}}, {{.Budget.FlightPeriod}})) {
            set req.http.X-Gs-Over = "client=" + req.http.X-Gs-Client + " in_flight={{.Budget.InFlight}}";
        } else {
            set req.http.X-Gs-Flight = req.http.X-Gs-Client;
        }
        if (req.http.X-Gs-Over) {
            set req.http.X-Gs-Reason = {{reason "over_budget"}} + " " + req.http.X-Gs-Over;
            {{logReason "req.http.X-Gs-Reason"}}
            unset req.http.X-Gs-Reason;
{{- if .StaleIfError}}
            if (req.http.X-Gs-Anon && req.restarts < 3) {
                set req.http.X-Gs-Stale = "1";
                return (restart);
            }
{{- end}}
            return (synth(429, "Too Many Requests"));
        }
    }
}

# The answer to a request gearshift_budget let go to the backend has
# come: its client has one fewer in flight.
sub gearshift_landed {
    if (req.http.X-Gs-Flight) {
        vsthrottle.return_token("gearshift-flight:" + req.http.X-Gs-Flight, {{.Budget.InFlight}}, {{.Budget.FlightPeriod}});
        unset req.http.X-Gs-Flight;
    }
}

{{ end -}}
# Marks a session's uncacheable request: once it is answered, vcl_deliver
# drops the objects tagged with that session (X-Gs-Sid), in whatever gear
# cached them: by xkey's tag with varnish-modules, else by a ban. Other
# sessions' and anonymous objects are not touched.
sub gearshift_drop_session {
    if (req.http.X-Gs-Session) {
        set req.http.X-Gs-Drop = {{sessionTag "req.http.X-Gs-Session"}};
    }
}

sub vcl_pipe {
    # Only a websocket handshake is piped (gearshift_recv): the client's
    # own Connection header never reaches the backend. "close": a backend
    # that answers the handshake with anything but 101 closes the
    # connection, so that no request written behind the handshake rides
    # the pipe to it past every rule and budget.
    set bereq.http.Upgrade = "websocket";
    set bereq.http.Connection = "Upgrade, close";
    unset bereq.http.X-Gs-Site;
    unset bereq.http.X-Gs-Route;
    unset bereq.http.X-Gs-Site-Limit;
    unset bereq.http.X-Gs-Site-Flow;
    unset bereq.http.X-Gs-Held;
    unset bereq.http.X-Gs-Held-Anon;
    unset bereq.http.X-Gs-Held-Copy;
    unset bereq.http.X-Gs-Site-Copies;
    unset bereq.http.X-Gs-Site-Copies-Flow;
    unset bereq.http.X-Gs-Anon-Fetch;
}

sub vcl_hash {
{{- if .SortQuery}}
    # The query's parameters in one order, and no lone "?"
    # (profiles.sort_query): the backend still gets them as they came.
{{- end}}
    {{keyURL "req.http.X-Gs-Key" "req.url" "    "}}
    hash_data(req.http.X-Gs-Key);
    unset req.http.X-Gs-Key;
    hash_data(req.http.X-Gs-Host);
    # A site behind a TLS terminator answers http with a redirect to https.
    hash_data(req.http.X-Forwarded-Proto);
    if (req.http.X-Gs-Session) {
        hash_data("gearshift-session");
        hash_data(req.http.X-Gs-Session);
    }
    return (lookup);
}

{{if .SessionReserve -}}
# backend.session_reserve: {{.SessionReserve}} of the backend's {{.MaxConnections}}
# connections are kept for logged-in users and writes. An anonymous
# visitor's fetch (no session, no Authorization, a GET or HEAD) goes to
# gearshift_copies{{if .SpareConnections}} and gearshift_spare{{end}}, which hold {{.CopyConnections}} at most:
# over it the fetch fails at once (Varnish counts the backend busy) and the
# visitor gets a stored copy or a fast 503, never a place in a queue. Marked here, in
# vcl_miss and in vcl_pass: a refresh in the background is a fetch too.
sub gearshift_anon_fetch {
    if (!req.http.X-Gs-Session && !req.http.Authorization && (req.method == "GET" || req.method == "HEAD")) {
        set req.http.X-Gs-Anon-Fetch = "1";
    } else {
        unset req.http.X-Gs-Anon-Fetch;
    }
}

{{ end -}}
{{if .PurgeACL -}}
# A PURGE's lookups (gearshift_recv): the anonymous copy of each scheme in
# turn (a direct request's, which tells none, then http's and https's),
# without grace, so that the lookup waits for a fetch under way.
sub gearshift_purge_lookup {
    if (req.http.X-Gs-Purge == "direct") {
        unset req.http.X-Forwarded-Proto;
    } else {
        set req.http.X-Forwarded-Proto = req.http.X-Gs-Purge;
    }
    unset req.http.X-Gs-Session;
    unset req.http.Cookie;
    set req.grace = 0s;
    return (hash);
}

# What the lookup found stored (any variant), fresh or stale: {{if .SoftPurge}}marked
# stale, kept in grace (profiles.soft_purge){{else}}removed{{end}}. Then the next scheme.
sub gearshift_purge_stored {
{{- if .SoftPurge}}
    # A soft purge's TTL counts from when the PURGE came (req.time), and an
    # object whose TTL ends before it was stored is never served, not even
    # stale: the answer of a fetch the PURGE waited for would go. So the
    # TTL ends now (and a microsecond: the lookup that found it came after
    # it was stored).
    set req.http.X-Gs-Purged = purge.soft(now - req.time + 0.001ms);
{{- else}}
    set req.http.X-Gs-Purged = purge.hard();
{{- end}}
    call gearshift_purge_next;
}

sub gearshift_purge_next {
    if (req.http.X-Gs-Purge == "direct") {
        set req.http.X-Gs-Purge = "http";
        return (restart);
    }
    if (req.http.X-Gs-Purge == "http") {
        set req.http.X-Gs-Purge = "https";
        return (restart);
    }
    return (synth(200, "Purged"));
}

{{end -}}
sub vcl_hit {
{{- if .PurgeACL}}
    if (req.http.X-Gs-Purge) {
        call gearshift_purge_stored;
    }
{{- end}}
    set req.http.X-Gs-Cache = "HIT";
{{- if .SessionReserve}}
    call gearshift_anon_fetch;
{{- end}}
    if (obj.ttl <= 0s) {
        # Past its TTL, served in grace while a refresh runs: every gear
        # says so alike.
        set req.http.X-Gs-Cache = "STALE";
    }
{{- if .Guest}}
    if (obj.http.X-Gs-Guest) {
        # A guest copy: its refresh is the daemon's check again.
        set req.http.X-Gs-Guest = "copy";
    }
{{- end}}
{{- if .StaleIfError}}
    # The backend failed this request: any gear serves an anonymous
    # page's copy younger than stale_if_error rather than the error.
    if (req.http.X-Gs-Stale) {
        if (obj.age > {{.StaleIfError}}) {
            call gearshift_no_copy;
        }
        set req.http.X-Gs-Cache = "STALE";
        return (deliver);
    }
{{- end}}
}

sub vcl_miss {
{{- if .PurgeACL}}
    if (req.http.X-Gs-Purge) {
        call gearshift_purge_stored;
    }
{{- end}}
    if (req.is_hitmiss) {
        set req.http.X-Gs-Cache = "PASS";
    } else {
        set req.http.X-Gs-Cache = "MISS";
    }
{{- if .SessionReserve}}
    call gearshift_anon_fetch;
{{- end}}
{{- if .StaleIfError}}
    if (req.http.X-Gs-Stale) {
        # No copy to serve for the failed request: its error, without
        # asking the backend again.
        call gearshift_no_copy;
    }
{{- end}}
{{- if .Budget}}
    call gearshift_budget;
{{- end}}
{{- if .SiteLimits}}
    call gearshift_site_limit;
{{- end}}
}

sub vcl_pass {
{{- if .PurgeACL}}
    if (req.http.X-Gs-Purge) {
        # Uncacheable (a hit-for-pass): nothing stored to purge.
        call gearshift_purge_next;
    }
{{- end}}
    set req.http.X-Gs-Cache = "PASS";
{{- if .SessionReserve}}
    call gearshift_anon_fetch;
{{- end}}
{{- if .StaleIfError}}
    if (req.http.X-Gs-Stale) {
        call gearshift_no_copy;
    }
{{- end}}
{{- if .Budget}}
    call gearshift_budget;
{{- end}}
{{- if .SiteLimits}}
    call gearshift_site_limit;
{{- end}}
}
{{- if .SiteLimits}}

# With the config's sites the backend's connections are shared out over
# every loaded VCL: Varnish counts a backend's .max_connections in each
# VCL apart, so sites in three gears would let three times through. The
# server's backend.max_connections ({{.SiteLimits.Backend}}) and each
# site's max_connections are vsthrottle buckets, which every VCL shares:
# a request to the backend holds a token of each until its answer comes
# (gearshift_site_landed), and a token lost on the way comes back on its
# own. Over either, an anonymous visitor gets a stored copy when there is
# one, else a fast 503: never a place in a queue.
{{- if .SiteLimits.Anon}}
# An anonymous visitor's fetch also holds a token of gearshift-anon, of
# {{.SiteLimits.Anon}}: backend.session_reserve's {{.SessionReserve}} stay for logged-in
# users and writes over every VCL too.
{{- end}}
sub gearshift_site_limit {
    if (req.http.X-Gs-Site && !req.http.X-Gs-Held) {
        if (vsthrottle.is_denied("gearshift-backend", {{.SiteLimits.Backend}}, {{.SiteLimits.Flow}})) {
            set req.http.X-Gs-Full = "backend max_connections={{.SiteLimits.Backend}}";
{{- if .SiteLimits.Anon}}
        } elsif (req.http.X-Gs-Anon-Fetch && vsthrottle.is_denied("gearshift-anon", {{.SiteLimits.Anon}}, {{.SiteLimits.AnonFlow}})) {
            vsthrottle.return_token("gearshift-backend", {{.SiteLimits.Backend}}, {{.SiteLimits.Flow}});
            set req.http.X-Gs-Full = "backend session_reserve={{.SessionReserve}}";
{{- end}}
        } elsif (req.http.X-Gs-Site-Limit && vsthrottle.is_denied("gearshift-site:" + req.http.X-Gs-Site,
                std.integer(req.http.X-Gs-Site-Limit, 1), std.duration(req.http.X-Gs-Site-Flow, 1h))) {
            vsthrottle.return_token("gearshift-backend", {{.SiteLimits.Backend}}, {{.SiteLimits.Flow}});
{{- if .SiteLimits.Anon}}
            if (req.http.X-Gs-Anon-Fetch) {
                vsthrottle.return_token("gearshift-anon", {{.SiteLimits.Anon}}, {{.SiteLimits.AnonFlow}});
            }
{{- end}}
            set req.http.X-Gs-Full = "site=" + req.http.X-Gs-Site + " max_connections=" + req.http.X-Gs-Site-Limit;
        } elsif (req.http.X-Gs-Copy && req.http.X-Gs-Site-Copies && vsthrottle.is_denied("gearshift-site-copies:" + req.http.X-Gs-Site,
                std.integer(req.http.X-Gs-Site-Copies, 1), std.duration(req.http.X-Gs-Site-Copies-Flow, 1h))) {
            # A refresh of a stored copy holds at most three quarters of
            # the site's connections: the rest is for pages with no copy
            # to fall back on (a page never fetched, in a surge's first
            # second). Its visitor gets the copy.
            vsthrottle.return_token("gearshift-backend", {{.SiteLimits.Backend}}, {{.SiteLimits.Flow}});
{{- if .SiteLimits.Anon}}
            if (req.http.X-Gs-Anon-Fetch) {
                vsthrottle.return_token("gearshift-anon", {{.SiteLimits.Anon}}, {{.SiteLimits.AnonFlow}});
            }
{{- end}}
            vsthrottle.return_token("gearshift-site:" + req.http.X-Gs-Site,
                std.integer(req.http.X-Gs-Site-Limit, 1), std.duration(req.http.X-Gs-Site-Flow, 1h));
            set req.http.X-Gs-Full = "site=" + req.http.X-Gs-Site + " copies=" + req.http.X-Gs-Site-Copies;
        } else {
            set req.http.X-Gs-Held = req.http.X-Gs-Site;
{{- if .SiteLimits.Anon}}
            if (req.http.X-Gs-Anon-Fetch) {
                set req.http.X-Gs-Held-Anon = "1";
            }
{{- end}}
            if (req.http.X-Gs-Copy && req.http.X-Gs-Site-Copies) {
                set req.http.X-Gs-Held-Copy = "1";
            }
        }
        if (req.http.X-Gs-Full) {
            set req.http.X-Gs-Reason = {{reason "backend_full"}} + " " + req.http.X-Gs-Full;
            {{logReason "req.http.X-Gs-Reason"}}
            unset req.http.X-Gs-Reason;
            unset req.http.X-Gs-Full;
{{- if .StaleIfError}}
            if (req.http.X-Gs-Anon && req.restarts < 3) {
                set req.http.X-Gs-Stale = "1";
                return (restart);
            }
{{- end}}
            return (synth(503, "Backend busy"));
        }
    }
}

# The answer to a request gearshift_site_limit let go to the backend has
# come: the server and its site have one fewer connection in use.
sub gearshift_site_landed {
    if (req.http.X-Gs-Held) {
        vsthrottle.return_token("gearshift-backend", {{.SiteLimits.Backend}}, {{.SiteLimits.Flow}});
        if (req.http.X-Gs-Site-Limit) {
            vsthrottle.return_token("gearshift-site:" + req.http.X-Gs-Held,
                std.integer(req.http.X-Gs-Site-Limit, 1), std.duration(req.http.X-Gs-Site-Flow, 1h));
        }
{{- if .SiteLimits.Anon}}
        if (req.http.X-Gs-Held-Anon) {
            vsthrottle.return_token("gearshift-anon", {{.SiteLimits.Anon}}, {{.SiteLimits.AnonFlow}});
            unset req.http.X-Gs-Held-Anon;
        }
{{- end}}
        if (req.http.X-Gs-Held-Copy) {
            vsthrottle.return_token("gearshift-site-copies:" + req.http.X-Gs-Held,
                std.integer(req.http.X-Gs-Site-Copies, 1), std.duration(req.http.X-Gs-Site-Copies-Flow, 1h));
            unset req.http.X-Gs-Held-Copy;
        }
        unset req.http.X-Gs-Held;
    }
}
{{- end}}
{{end}}

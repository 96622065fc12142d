{{/* the request's way in, shared by every gear: gearshift_recv. Included by common.vcl's head. */ -}}
{{define "common-recv"}}
# Shared by every gear: decides everything that does not depend on the gear
# and returns; a gear's vcl_recv only sees anonymous or session requests for
# cacheable, non-static content.
sub gearshift_recv {
    if (req.restarts == 0) {
        # Only an origin-form target ("/path?query") reaches a backend or
        # the daemon: another form could name an address of its own to
        # whoever builds a URL from it, and would slip past every rule
        # written for paths. An absolute-form http(s) target becomes its
        # path, its authority the Host (RFC 9112 section 3.2.2); a BAN's
        # URL is a regex, refused below unless purge_acl sent it.
        if (req.method != "BAN") {
            if (req.url ~ "(?i)^https?://") {
                if (req.url !~ {"(?i)^https?://([a-z0-9][a-z0-9.-]*|\[[0-9a-f:.]+\])(:[0-9]{1,5})?([/?]|$)"}) {
                    return (synth(400, "The request-target must be a path, or an http(s) URL with a host"));
                }
                set req.http.Host = regsub(req.url, "(?i)^https?://([^/?]*).*$", "\1");
                set req.url = regsub(req.url, "(?i)^https?://[^/?]*", "");
                if (req.url !~ "^/") {
                    set req.url = "/" + req.url;
                }
            }
            if (req.url !~ "^/") {
                return (synth(400, "The request-target must be a path, or an http(s) URL with a host"));
            }
        }
        # A Host is a name or an address, and a port: nothing else
        # ("user@", a path) reaches the backend or the cache key.
        if (req.http.Host ~ {"[^A-Za-z0-9._:\[\]-]"}) {
            return (synth(400, "A Host header holds a name or an address and a port, nothing else"));
        }
        # Headers gearshift uses internally never come from the client.
        # Headers a backend may trust and the cache key does not hold: a
        # visitor's X-Forwarded-Host would be in the page (its links, its
        # canonical URL) served to everyone after it.
        unset req.http.X-Forwarded-Host;
        unset req.http.X-Forwarded-Port;
        unset req.http.X-Forwarded-Server;
        unset req.http.Forwarded;
        unset req.http.X-Original-URL;
        unset req.http.X-Rewrite-URL;
        unset req.http.X-Real-IP;
        unset req.http.X-Client-IP;
        unset req.http.True-Client-IP;
        unset req.http.CF-Connecting-IP;
        # How the visitor is known (the front door, counted by the daemon
        # from this log record): straight, told by PROXY protocol, forwarded
        # by a trusted proxy, or not at all (a trusted peer that told
        # nothing: a local tool, or a terminator every visitor would pass
        # through as trusted).
        set req.http.X-Gs-Door = "{{.Doors.Direct}}";
{{- if .TrustedProxies}}
        if (client.ip !~ gearshift_trusted) {
            # Varnish has appended the peer's address to what the client
            # sent; only a trusted proxy's list is kept.
            set req.http.X-Forwarded-For = client.ip;
            unset req.http.X-Forwarded-Proto;
        } else if (req.http.X-Forwarded-For ~ ",") {
            set req.http.X-Gs-Door = "{{.Doors.Forwarded}}";
        } else {
            set req.http.X-Gs-Door = "{{.Doors.Unidentified}}";
        }
{{- else}}
        set req.http.X-Forwarded-For = client.ip;
        unset req.http.X-Forwarded-Proto;
{{- end}}
        # A scheme, or nothing: the first of a proxies' list, lower case.
        if (req.http.X-Forwarded-Proto) {
            set req.http.X-Forwarded-Proto = std.tolower(regsub(req.http.X-Forwarded-Proto, "^\s*([^,\s]*).*$", "\1"));
            if (req.http.X-Forwarded-Proto !~ "^https?$") {
                unset req.http.X-Forwarded-Proto;
            }
        }
        if (client.ip != remote.ip || proxy.is_ssl()) {
            set req.http.X-Gs-Door = "{{.Doors.ProxyProtocol}}";
            # PROXY protocol (a listener "-a NAME=ADDR,PROXY", as Debian's
            # hitch speaks it): the terminator told the visitor's address
            # (client.ip) and, in PROXY v2, whether it came over TLS. The
            # scheme is part of the cache key and reaches the backend. A
            # visitor on the terminator's own address (curl on the host)
            # has client.ip == remote.ip: its TLS still tells it (only a
            # PROXY listener reads a PROXY header).
            if (proxy.is_ssl()) {
                set req.http.X-Forwarded-Proto = "https";
            } else {
                set req.http.X-Forwarded-Proto = "http";
            }
        }
        std.log("{{.Doors.Log}}" + req.http.X-Gs-Door);
        unset req.http.X-Gs-Door;
        unset req.http.X-Gs-Cache;
        unset req.http.X-Gs-Session;
        unset req.http.X-Gs-Host;
        unset req.http.X-Gs-Refresh;
        unset req.http.X-Gs-Path;
        unset req.http.X-Gs-Drop;
        unset req.http.X-Gs-Stripped;
        unset req.http.X-Gs-Anon;
        unset req.http.X-Gs-Stale;
        unset req.http.X-Gs-Sick;
        unset req.http.X-Gs-Copy;
        unset req.http.X-Gs-Query;
        unset req.http.X-Gs-Guest;
        unset req.http.X-Gs-Guest-Secret;
        unset req.http.X-Gs-Unstripped;
        unset req.http.X-Gs-Key;
        unset req.http.X-Gs-Hops;
        unset req.http.X-Gs-Client;
        unset req.http.X-Gs-Budget;
        unset req.http.X-Gs-Over;
        unset req.http.X-Gs-Flight;
        unset req.http.X-Gs-Tags;
        unset req.http.X-Gs-Site;
        unset req.http.X-Gs-Route;
        unset req.http.X-Gs-Site-Limit;
        unset req.http.X-Gs-Site-Flow;
        unset req.http.X-Gs-Held;
        unset req.http.X-Gs-Held-Anon;
        unset req.http.X-Gs-Held-Copy;
        unset req.http.X-Gs-Site-Copies;
        unset req.http.X-Gs-Site-Copies-Flow;
        unset req.http.X-Gs-Anon-Fetch;
        unset req.http.X-Gs-Full;
        unset req.http.X-Gs-Scope;
        unset req.http.X-Gs-Purge;
        unset req.http.X-Gs-Purged;
{{- if .Budget}}
        call gearshift_client;
{{- end}}
    }
    set req.backend_hint = default;
{{- if .Sites}}
    call gearshift_site;
{{- end}}
    # Why a passed request goes to the backend: vcl_backend_fetch logs it.
    unset req.http.X-Gs-Reason;
    # HTTP/2 and some clients split cookies over several headers.
    std.collect(req.http.Cookie, "; ");
    # The cookies that count: the request's, separators made canonical
    # ("a=1;b=2"), without the harmless ones (profiles.ignore_cookies).
    # The Cookie header itself is left as it came: a request that is
    # passed reaches the backend with every cookie it sent.
    unset req.http.X-Gs-Cookie;
    if (req.http.Cookie) {
        set req.http.X-Gs-Cookie = regsuball(";" + req.http.Cookie, "[\s;]*;[\s;]*", ";");
{{- if .IgnoreRE}}
        set req.http.X-Gs-Cookie = regsuball(req.http.X-Gs-Cookie, {";{{.IgnoreRE}}=[^;]*"}, "");
{{- end}}
        set req.http.X-Gs-Cookie = regsuball(req.http.X-Gs-Cookie, "^;+|;+$", "");
        if (req.http.X-Gs-Cookie == "") {
            unset req.http.X-Gs-Cookie;
        }
    }
{{- if .DropRE}}

    # The tracking parameters a click carries (profiles.drop_query_params)
    # are removed in every gear, before the cache key and the backend see
    # the URL: no page renders differently for them, and each click's own
    # value would make its own cache miss. Empty parameters left go too.
    # A BAN's URL is a regex, left as it is.
    if (req.method != "BAN" && req.url ~ {"[?&]{{.DropRE}}(?:[=&]|$)"}) {
        set req.http.X-Gs-Query = regsub(req.url, "^[^?]*\?", "&");
        set req.http.X-Gs-Query = regsuball(req.http.X-Gs-Query, {"&{{.DropRE}}(?:=[^&]*)?(?=&|$)"}, "");
        set req.http.X-Gs-Query = regsuball(regsuball(req.http.X-Gs-Query, "&&+", "&"), "^&|&$", "");
        set req.url = regsub(req.url, "\?.*$", "");
        if (req.http.X-Gs-Query != "") {
            set req.url = req.url + "?" + req.http.X-Gs-Query;
        }
        unset req.http.X-Gs-Query;
    }
{{- end}}
{{- if .NormalizeHost}}

    # Host normalised in the cache key only (lower case, no port, no
    # "www."): the backend sees the Host the client sent, since a site
    # answers any other name or port with a redirect to its own, which
    # would loop.
    set req.http.X-Gs-Host = {{hostKey "req.http.Host"}};
{{- else}}
    set req.http.X-Gs-Host = req.http.Host;
{{- end}}

{{- if .PurgeACL}}
    if (req.restarts > 0 && req.http.X-Gs-Purge) {
        # A PURGE's next lookup (X-Gs-Purge is set only below, after the
        # PURGE was allowed; a visitor's is dropped on the way in).
        call gearshift_purge_lookup;
    }
{{- end}}
    if (req.method == "PURGE" || req.method == "BAN") {
{{- if .PurgeACL}}
        if (client.ip !~ gearshift_purgers) {
            return (synth(405, "Not allowed"));
        }
{{- range $i, $s := .SiteScopes}}{{if $s.Token}}
        # A site with a purge_token_file of its own: its PURGE and BAN need
        # that token, and the server's does not do.
        if (req.http.X-Gs-Site == "{{$s.Site}}" && req.http.X-Purge-Token != {{$s.Token}}) {
            return (synth(403, "A " + req.method + " for site {{$s.Site}} needs the X-Purge-Token of its purge_token_file"));
        }
{{- end}}{{end}}
{{- if .ServerTokenSites}}
        # The server's rule for the sites without a token of their own.
        if ({{.ServerTokenSites}}) {
{{- end}}
{{- if .PurgeToken}}
        # The secret of profiles.purge_token_file: the address alone says
        # nothing behind a proxy on the same host, or beside other sites'
        # scripts.
        if (req.http.X-Purge-Token != {{.PurgeToken}}) {
            return (synth(403, "A " + req.method + " needs the X-Purge-Token of profiles.purge_token_file"));
        }
{{- else}}
        # No purge_token_file: only a client of the ACL that came straight,
        # not one a proxy forwarded (its X-Forwarded-For names someone
        # else: a same-host TLS terminator's visitor).
        if (req.http.X-Forwarded-For ~ ",") {
            return (synth(403, "A " + req.method + " through a proxy needs the X-Purge-Token of profiles.purge_token_file"));
        }
{{- end}}
{{- if .ServerTokenSites}}
        }
{{- end}}
        unset req.http.X-Purge-Token;
        unset req.http.Cookie;
{{- if .SiteScopes}}
        # With sites a PURGE or BAN reaches only the site it was sent to:
        # every host of that site, none of another's (tags included).
{{- range .SiteScopes}}
        if (req.http.X-Gs-Site == "{{.Site}}") {
            set req.http.X-Gs-Scope = "{{.Scope}}";
        }
{{- end}}
{{- end}}
        if (req.method == "PURGE" && (req.http.xkey || req.http.Surrogate-Key)) {
            # Tags: every page the backend tagged with one (xkey or
            # Surrogate-Key response headers), on this Varnish.
            std.collect(req.http.xkey, " ");
            std.collect(req.http.Surrogate-Key, " ");
            set req.http.X-Gs-Tags = req.http.xkey + " " + req.http.Surrogate-Key;
            if (req.http.X-Gs-Tags !~ {"{{.TagRE}}"}) {
                return (synth(400, "A PURGE's xkey header holds tags: letters, digits and _.:=%/+- separated by spaces or commas"));
            }
{{- if and .XkeyTags (not .SoftPurge)}}
            set req.http.X-Gs-Tags = xkey.purge(req.http.X-Gs-Tags);
            return (synth(200, "Purged " + req.http.X-Gs-Tags + " objects"));
{{- else}}
{{- if .XkeyTags}}
            # profiles.soft_purge: the tagged pages are marked stale, each
            # served while one fetch refreshes it; the sessions' copies
            # among them go at once (the ban below).
            set req.http.X-Gs-Purged = xkey.softpurge(req.http.X-Gs-Tags);
{{- else}}
            # Without xkey (or with sites: xkey's tags are the server's), a
            # ban on the tags the objects hold{{if .SoftPurge}}: a ban has no soft
            # form, so the pages go at once{{end}}.
{{- end}}
            set req.http.X-Gs-Tags = regsuball(regsuball(req.http.X-Gs-Tags, "^[\s,]+|[\s,]+$", ""), "[\s,]+", "|");
            set req.http.X-Gs-Tags = regsuball(req.http.X-Gs-Tags, "([.+])", "[\1]");
            if (!std.ban({{if .SiteScopes}}req.http.X-Gs-Scope + " && " + {{end}}{{if .XkeyTags}}"obj.http.X-Gs-Sid ~ . && " + {{end}}"obj.http.xkey ~ (^|[[:space:],])(" + req.http.X-Gs-Tags + ")([[:space:],]|$)")) {
                return (synth(400, "Purge refused: " + std.ban_error()));
            }
            return (synth(200, "Purged"));
{{- end}}
        }
        # Ban arguments are bare words, split at white space (Varnish's ban
        # parser has no quoting): a Host with white space could not be
        # matched, or would add conditions of its own. A request line's
        # URL has none.
        if (req.http.X-Gs-Host !~ "^\S+$") {
            return (synth(400, "A " + req.method + " needs a Host header without white space"));
        }
        if (req.method == "BAN") {
            # The path is a regex over the URLs of this host.
            if (!std.ban({{banHost}} + " && obj.http.X-Gs-Url ~ " + req.url)) {
                return (synth(400, "Ban refused: " + std.ban_error()));
            }
            return (synth(200, "Banned"));
        }
{{- if .SoftPurge}}
        # profiles.soft_purge: this host's anonymous copies of the URL, of
        # both schemes, are marked stale by the lookups below (served while
        # one fetch refreshes them); heavy's copy of every session goes at
        # once{{if .SiteScopes}}, and so does every copy on the site's other hosts{{end}}.
        {{keyURL "req.http.X-Gs-Key" "req.url" "        "}}
        if (!std.ban({{banHost}} + " && obj.http.X-Gs-Url == " + req.http.X-Gs-Key + " && obj.http.X-Gs-Sid ~ .")) {
            return (synth(400, "Purge refused: " + std.ban_error()));
        }
{{- if .SiteScopes}}
        if (!std.ban({{banHost}} + " && obj.http.X-Gs-Url == " + req.http.X-Gs-Key + " && obj.http.X-Gs-Host != " + req.http.X-Gs-Host)) {
            return (synth(400, "Purge refused: " + std.ban_error()));
        }
{{- end}}
{{- else}}
        # Every variant of the URL goes: both schemes, and heavy's copy of
        # every session, not only the copy this request would be served.
        {{keyURL "req.http.X-Gs-Key" "req.url" "        "}}
        if (!std.ban({{banHost}} + " && obj.http.X-Gs-Url == " + req.http.X-Gs-Key)) {
            return (synth(400, "Purge refused: " + std.ban_error()));
        }
{{- end}}
        # A ban reaches no fetch under way: what a refresh begun before
        # this PURGE stores would be served for its whole TTL. So the
        # PURGE looks up each scheme's anonymous copy without grace, which
        # waits for such a fetch to store its answer, and then purges what
        # is stored (gearshift_purge_stored).
        set req.http.X-Gs-Purge = "direct";
        call gearshift_purge_lookup;
{{- else}}
        return (synth(405, "Not allowed"));
{{- end}}
    }
    unset req.http.X-Purge-Token;

    # Apache's status pages, and the PHP-FPM status pages gearshift reads,
    # list other visitors' addresses and URLs: never answered through
    # Varnish, whoever asks (behind a TLS terminator on the same host every
    # visitor comes from loopback). gearshift's sources, and an operator,
    # ask Apache and PHP-FPM directly. The path is matched however it is
    # written (slashes, dot-segments, percent-encoded letters).
    if ({{statusPath}}) {
        return (synth(403, "Status pages are not served through Varnish: ask the server directly"));
    }

    # A websocket is piped (a raw connection to the backend) only on the
    # paths of profiles.websocket_paths, and only as a websocket handshake;
    # vcl_pipe writes the hop-by-hop headers itself. Any other Upgrade is
    # dropped and the request served as HTTP. A path that resolves
    # elsewhere than it reads (a dot-segment, anything percent-encoded) is
    # on no websocket path: "/ws/../server-status" would pipe a status
    # page past every rule.
{{- if .WebsocketPaths}}
    if (req.http.Upgrade ~ "(?i)^\s*websocket\s*$" && req.http.Connection ~ "(?i)(^|,)\s*upgrade\s*(,|$)" &&
        req.method == "GET" && req.url !~ "^[^?#]*(/\.\.?(/|$|[?#])|%|\\)" &&
        ({{range $i, $p := .WebsocketPaths}}{{if $i}} || {{end}}req.url ~ {"^{{$p}}"}{{end}})) {
        return (pipe);
    }
{{- end}}
    unset req.http.Upgrade;

{{- if .SessionRE}}
    # A session request: one with a session cookie (profiles.session_cookies).
    # Its key holds the session cookies, name=value, in the client's order,
    # and nothing else.
    if (req.http.X-Gs-Cookie ~ {"(^|;){{.SessionRE}}="}) {
        {{sessionKey "req.http.X-Gs-Session" "req.http.X-Gs-Cookie"}}
        if (req.http.X-Gs-Session == "") {
            # Cannot happen; if it did, sharing a key would leak pages.
            set req.http.X-Gs-Reason = {{reason "session"}};
            return (pass);
        }
    }
{{- else}}
    # A session request: one with any cookie that is not known to be
    # harmless (profiles.ignore_cookies). Nothing tells which of a site's
    # cookies hold its users' sessions, so all of them do; the key is
    # every such cookie.
    if (req.http.X-Gs-Cookie) {
        {{sessionKey "req.http.X-Gs-Session" "req.http.X-Gs-Cookie"}}
    }
{{- end}}

    # Never cached, whatever the gear. A session's request that is not
    # cacheable by its method or path (a write, a logout) drops that
    # session's cached pages once answered: see vcl_deliver.
    if (req.method != "GET" && req.method != "HEAD") {
        set req.http.X-Gs-Reason = {{reason "method"}};
        call gearshift_drop_session;
        return (pass);
    }
    # never_cache sees the path as the backend will resolve it: without
    # the scheme and host of an absolute-form URL, repeated slashes
    # collapsed (the backend still gets the URL as it came). A path that
    # resolves elsewhere than it reads (dot-segments; "." "/" or a letter
    # percent-encoded) is never cached: no regex over it can tell what it
    # names, and ordinary links do not look like that.
    set req.http.X-Gs-Path = regsub(req.url, "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*", "");
    if (regsub(req.http.X-Gs-Path, "[?#].*$", "") ~ "(?i)(^|/)\.\.?(/|$)|%(2[d-f]|3[0-9]|[46][1-9a-f]|[57][0-9a]|5f|7e)") {
        set req.http.X-Gs-Reason = {{reason "never_cache"}};
        call gearshift_drop_session;
        return (pass);
    }
    set req.http.X-Gs-Path = regsuball(regsub(req.http.X-Gs-Path, "[?#].*$", ""), "//+", "/") +
        regsub(req.http.X-Gs-Path, "^[^?#]*", "");
    if (req.http.X-Gs-Path !~ "^/") {
        set req.http.X-Gs-Path = "/" + req.http.X-Gs-Path;
    }
{{- range .NeverCache}}
    if (req.http.X-Gs-Path ~ {"{{.}}"}) {
        set req.http.X-Gs-Reason = {{reason "never_cache"}};
        call gearshift_drop_session;
        return (pass);
    }
{{- end}}
    unset req.http.X-Gs-Path;

    # Headers that make the answer user- or request-specific: credentials
    # always, and profiles.pass_headers (a nonce, a token).
{{- range .PassHeaders}}
    if (req.http.{{.}}) {
        set req.http.X-Gs-Reason = {{reason "pass_header"}} + " header={{.}}";
        return (pass);
    }
{{- end}}
{{- if .StaticRE}}

    # Static objects: the same for everyone, cookies are noise.
    if (req.url ~ {"{{.StaticRE}}"}) {
        unset req.http.Cookie;
        unset req.http.X-Gs-Session;
        return (hash);
    }
{{- end}}
{{- if .StaleIfError}}

    # An anonymous page: when the backend fails or is full, its stored
    # copy is served (profiles.stale_if_error): see vcl_deliver.
    if (!req.http.X-Gs-Session) {
        set req.http.X-Gs-Anon = "1";
        if (req.http.X-Gs-Stale) {
            set req.grace = {{.StaleIfError}};
{{- if .Probe}}
        } else if (!std.healthy(gearshift_probe)) {
            # The probe finds the backend sick: copies within
            # stale_if_error count, and a fetch with one to fall back on
            # waits the probe's timeout at most (vcl_backend_fetch).
            set req.http.X-Gs-Sick = "1";
            set req.grace = {{.StaleIfError}};
{{- end}}
        }
    }
{{- end}}
}

{{- end}}

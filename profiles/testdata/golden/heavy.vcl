vcl 4.1;

# gearshift profile "heavy": everything cacheable: anonymous pages shared, session pages per session, stale served in grace
# Rendered by gearshift from its configuration; change the config (or set
# profiles.heavy.vcl_file to use your own program), not this text.

import std;
# proxy: what a TLS terminator told over PROXY protocol v2 (the scheme).
import proxy;
# purge: a PURGE marks a page stale (profiles.soft_purge) or removes it
# once a fetch under way has stored it.
import purge;
# varnish-modules: xkey drops the pages of a tag (a session's, a site's)
# without a ban; vsthrottle keeps each client's budget.
import xkey;
import vsthrottle;

# The backend, twice, each with a connection limit: a fetch over it fails
# at once instead of queueing in front of PHP (backend.max_connections).
# A fetch for a page that has a stored copy to fall back on
# (stale_if_error: light's and moderate's fetches of what they keep for
# heavy) may take three quarters of the limit (gearshift_copies), so that
# such fetches never take the workers a logged-in visitor, a form or a
# page with no copy needs. With backend.session_reserve every anonymous
# fetch goes there, and its limit is max_connections less the reserve.
backend default {
    .host = "127.0.0.1";
    .port = "8080";
    .max_connections = 150;
    .first_byte_timeout = 30s;
}

backend gearshift_copies {
    .host = "127.0.0.1";
    .port = "8080";
    .max_connections = 84;
    .first_byte_timeout = 30s;
}

# Of the anonymous visitors' 112, 28 that a refresh of a stored
# copy never takes: a page with no copy to fall back on is fetched here
# first, and on gearshift_copies when these are full (vcl_backend_fetch).
# In a surge's first second light's refreshes fill gearshift_copies (their
# visitors get the copy when refused); a page never fetched would get a
# 503 for every visitor who asks for it.
backend gearshift_spare {
    .host = "127.0.0.1";
    .port = "8080";
    .max_connections = 28;
    .first_byte_timeout = 30s;
}

# The health probe (backend.probe) on a backend of its own that nothing is
# fetched from: a sick verdict makes the profiles serve stored copies at
# once, and never refuses a fetch the real backend could answer (a probe
# URL that redirects or needs a login takes no site down).
backend gearshift_probe {
    .host = "127.0.0.1";
    .port = "8080";
    # Its requests carry User-Agent: gearshift-probe, for the access log
    # to leave out (docs/gears.md).
    .probe = {
        .request =
            "GET / HTTP/1.1"
            "Host: 127.0.0.1"
            "User-Agent: gearshift-probe"
            "Connection: close";
        .interval = 2s;
        .timeout = 1s;
        .window = 5;
        .threshold = 3;
    }
}

# The gearshift daemon (profiles.guest_pages): heavy asks it for an
# anonymous page that set a cookie the last time it was fetched, and for a
# guest copy past its TTL. The daemon fetches the page twice from the
# backend as two new visitors and answers with a copy, Set-Cookie removed,
# only when both were the same; otherwise (or when it cannot be reached)
# the page is fetched from the backend as without it.
backend gearshift_guest {
    .host = "127.0.0.1";
    .port = "6089";
    .connect_timeout = 0.2s;
    .first_byte_timeout = 61s;
}

# Clients allowed to PURGE and BAN (profiles.purge_acl).
acl gearshift_purgers {
    "127.0.0.1";
    "::1";
}

# Proxies in front of Varnish whose X-Forwarded-For and X-Forwarded-Proto
# are believed (profiles.trusted_proxies): a TLS terminator, a CDN.
acl gearshift_trusted {
    "127.0.0.1";
    "::1";
}

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
        set req.http.X-Gs-Door = "direct";
        if (client.ip !~ gearshift_trusted) {
            # Varnish has appended the peer's address to what the client
            # sent; only a trusted proxy's list is kept.
            set req.http.X-Forwarded-For = client.ip;
            unset req.http.X-Forwarded-Proto;
        } else if (req.http.X-Forwarded-For ~ ",") {
            set req.http.X-Gs-Door = "forwarded";
        } else {
            set req.http.X-Gs-Door = "unidentified";
        }
        # A scheme, or nothing: the first of a proxies' list, lower case.
        if (req.http.X-Forwarded-Proto) {
            set req.http.X-Forwarded-Proto = std.tolower(regsub(req.http.X-Forwarded-Proto, "^\s*([^,\s]*).*$", "\1"));
            if (req.http.X-Forwarded-Proto !~ "^https?$") {
                unset req.http.X-Forwarded-Proto;
            }
        }
        if (client.ip != remote.ip || proxy.is_ssl()) {
            set req.http.X-Gs-Door = "proxy_protocol";
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
        std.log("gearshift-door: " + req.http.X-Gs-Door);
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
        call gearshift_client;
    }
    set req.backend_hint = default;
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
        set req.http.X-Gs-Cookie = regsuball(req.http.X-Gs-Cookie, {";(?:_ga|_ga_[^\s;=]*|_gid|_gat|_gat_[^\s;=]*|_gcl_[^\s;=]*|__utma|__utmb|__utmc|__utmt|__utmt_[^\s;=]*|__utmz|__utmv|_dc_gtm_[^\s;=]*|_fbp|_fbc|_clck|_clsk|_uetsid|_uetvid|_hjSessionUser_[^\s;=]*|_hjSession_[^\s;=]*|_hjid|_hjFirstSeen|_hjIncludedInSessionSample[^\s;=]*|_hjIncludedInPageviewSample|_hjAbsoluteSessionInProgress|_hjTLDTest|_pk_id\.[^\s;=]*|_pk_ses\.[^\s;=]*|_pk_ref\.[^\s;=]*|_pk_cvar\.[^\s;=]*|_pk_hsr\.[^\s;=]*|__hstc|__hssc|__hssrc|hubspotutk|_ttp|_pin_unauth|li_gc|_tt_enable_cookie|CookieConsent|OptanonConsent|OptanonAlertBoxClosed|cookieyes\-consent|cmplz_[^\s;=]*|cookielawinfo\-[^\s;=]*|viewed_cookie_policy|euconsent\-v2|wordpress_test_cookie|wp_lang|has_js)=[^;]*"}, "");
        set req.http.X-Gs-Cookie = regsuball(req.http.X-Gs-Cookie, "^;+|;+$", "");
        if (req.http.X-Gs-Cookie == "") {
            unset req.http.X-Gs-Cookie;
        }
    }

    # The tracking parameters a click carries (profiles.drop_query_params)
    # are removed in every gear, before the cache key and the backend see
    # the URL: no page renders differently for them, and each click's own
    # value would make its own cache miss. Empty parameters left go too.
    # A BAN's URL is a regex, left as it is.
    if (req.method != "BAN" && req.url ~ {"[?&](?:utm_[^&=]*|fbclid|gclid|gbraid|wbraid|dclid|msclkid|yclid|twclid|ttclid|igshid|mc_cid|mc_eid|_ga|_gl|_hsenc|_hsmi|mkt_tok|srsltid)(?:[=&]|$)"}) {
        set req.http.X-Gs-Query = regsub(req.url, "^[^?]*\?", "&");
        set req.http.X-Gs-Query = regsuball(req.http.X-Gs-Query, {"&(?:utm_[^&=]*|fbclid|gclid|gbraid|wbraid|dclid|msclkid|yclid|twclid|ttclid|igshid|mc_cid|mc_eid|_ga|_gl|_hsenc|_hsmi|mkt_tok|srsltid)(?:=[^&]*)?(?=&|$)"}, "");
        set req.http.X-Gs-Query = regsuball(regsuball(req.http.X-Gs-Query, "&&+", "&"), "^&|&$", "");
        set req.url = regsub(req.url, "\?.*$", "");
        if (req.http.X-Gs-Query != "") {
            set req.url = req.url + "?" + req.http.X-Gs-Query;
        }
        unset req.http.X-Gs-Query;
    }

    # Host normalised in the cache key only (lower case, no port, no
    # "www."): the backend sees the Host the client sent, since a site
    # answers any other name or port with a redirect to its own, which
    # would loop.
    set req.http.X-Gs-Host = regsub(std.tolower(regsub(req.http.Host, ":[0-9]+$", "")), "^www\.", "");
    if (req.restarts > 0 && req.http.X-Gs-Purge) {
        # A PURGE's next lookup (X-Gs-Purge is set only below, after the
        # PURGE was allowed; a visitor's is dropped on the way in).
        call gearshift_purge_lookup;
    }
    if (req.method == "PURGE" || req.method == "BAN") {
        if (client.ip !~ gearshift_purgers) {
            return (synth(405, "Not allowed"));
        }
        # No purge_token_file: only a client of the ACL that came straight,
        # not one a proxy forwarded (its X-Forwarded-For names someone
        # else: a same-host TLS terminator's visitor).
        if (req.http.X-Forwarded-For ~ ",") {
            return (synth(403, "A " + req.method + " through a proxy needs the X-Purge-Token of profiles.purge_token_file"));
        }
        unset req.http.X-Purge-Token;
        unset req.http.Cookie;
        if (req.method == "PURGE" && (req.http.xkey || req.http.Surrogate-Key)) {
            # Tags: every page the backend tagged with one (xkey or
            # Surrogate-Key response headers), on this Varnish.
            std.collect(req.http.xkey, " ");
            std.collect(req.http.Surrogate-Key, " ");
            set req.http.X-Gs-Tags = req.http.xkey + " " + req.http.Surrogate-Key;
            if (req.http.X-Gs-Tags !~ {"^[\s,]*[A-Za-z0-9_.:=%/+-]+(?:[\s,]+[A-Za-z0-9_.:=%/+-]+)*[\s,]*$"}) {
                return (synth(400, "A PURGE's xkey header holds tags: letters, digits and _.:=%/+- separated by spaces or commas"));
            }
            # profiles.soft_purge: the tagged pages are marked stale, each
            # served while one fetch refreshes it; the sessions' copies
            # among them go at once (the ban below).
            set req.http.X-Gs-Purged = xkey.softpurge(req.http.X-Gs-Tags);
            set req.http.X-Gs-Tags = regsuball(regsuball(req.http.X-Gs-Tags, "^[\s,]+|[\s,]+$", ""), "[\s,]+", "|");
            set req.http.X-Gs-Tags = regsuball(req.http.X-Gs-Tags, "([.+])", "[\1]");
            if (!std.ban("obj.http.X-Gs-Sid ~ . && " + "obj.http.xkey ~ (^|[[:space:],])(" + req.http.X-Gs-Tags + ")([[:space:],]|$)")) {
                return (synth(400, "Purge refused: " + std.ban_error()));
            }
            return (synth(200, "Purged"));
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
            if (!std.ban("obj.http.X-Gs-Host == " + req.http.X-Gs-Host + " && obj.http.X-Gs-Url ~ " + req.url)) {
                return (synth(400, "Ban refused: " + std.ban_error()));
            }
            return (synth(200, "Banned"));
        }
        # profiles.soft_purge: this host's anonymous copies of the URL, of
        # both schemes, are marked stale by the lookups below (served while
        # one fetch refreshes them); heavy's copy of every session goes at
        # once.
        if (req.url ~ {"\?(?:.*&)?([^=&]+)(?:=[^&]*)?&(?:.*&)?\1(?:[=&]|$)|\?.*(?:\[|%5[bB])"}) {
            set req.http.X-Gs-Key = req.url;
        } else {
            set req.http.X-Gs-Key = regsub(std.querysort(req.url), "\?$", "");
        }
        if (!std.ban("obj.http.X-Gs-Host == " + req.http.X-Gs-Host + " && obj.http.X-Gs-Url == " + req.http.X-Gs-Key + " && obj.http.X-Gs-Sid ~ .")) {
            return (synth(400, "Purge refused: " + std.ban_error()));
        }
        # A ban reaches no fetch under way: what a refresh begun before
        # this PURGE stores would be served for its whole TTL. So the
        # PURGE looks up each scheme's anonymous copy without grace, which
        # waits for such a fetch to store its answer, and then purges what
        # is stored (gearshift_purge_stored).
        set req.http.X-Gs-Purge = "direct";
        call gearshift_purge_lookup;
    }
    unset req.http.X-Purge-Token;

    # Apache's status pages, and the PHP-FPM status pages gearshift reads,
    # list other visitors' addresses and URLs: never answered through
    # Varnish, whoever asks (behind a TLS terminator on the same host every
    # visitor comes from loopback). gearshift's sources, and an operator,
    # ask Apache and PHP-FPM directly. The path is matched however it is
    # written (slashes, dot-segments, percent-encoded letters).
    if (regsub(req.url, "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*", "") ~ {"(?i)^[^?#]*(/|%2f)(?:s|%73)(?:e|%65)(?:r|%72)(?:v|%76)(?:e|%65)(?:r|%72)(?:\-|%2d)(?:(?:s|%73)(?:t|%74)(?:a|%61)(?:t|%74)(?:u|%75)(?:s|%73)|(?:i|%69)(?:n|%6e)(?:f|%66)(?:o|%6f))(?:/|%2f|[?#;]|$)"}) {
        return (synth(403, "Status pages are not served through Varnish: ask the server directly"));
    }

    # A websocket is piped (a raw connection to the backend) only on the
    # paths of profiles.websocket_paths, and only as a websocket handshake;
    # vcl_pipe writes the hop-by-hop headers itself. Any other Upgrade is
    # dropped and the request served as HTTP. A path that resolves
    # elsewhere than it reads (a dot-segment, anything percent-encoded) is
    # on no websocket path: "/ws/../server-status" would pipe a status
    # page past every rule.
    unset req.http.Upgrade;
    # A session request: one with any cookie that is not known to be
    # harmless (profiles.ignore_cookies). Nothing tells which of a site's
    # cookies hold its users' sessions, so all of them do; the key is
    # every such cookie.
    if (req.http.X-Gs-Cookie) {
        set req.http.X-Gs-Session = req.http.X-Gs-Cookie;
    }

    # Never cached, whatever the gear. A session's request that is not
    # cacheable by its method or path (a write, a logout) drops that
    # session's cached pages once answered: see vcl_deliver.
    if (req.method != "GET" && req.method != "HEAD") {
        set req.http.X-Gs-Reason = "method";
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
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    set req.http.X-Gs-Path = regsuball(regsub(req.http.X-Gs-Path, "[?#].*$", ""), "//+", "/") +
        regsub(req.http.X-Gs-Path, "^[^?#]*", "");
    if (req.http.X-Gs-Path !~ "^/") {
        set req.http.X-Gs-Path = "/" + req.http.X-Gs-Path;
    }
    if (req.http.X-Gs-Path ~ {"^/wp-admin"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    if (req.http.X-Gs-Path ~ {"^/wp-login\.php"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    if (req.http.X-Gs-Path ~ {"^/administrator"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    if (req.http.X-Gs-Path ~ {"^/user/login"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    if (req.http.X-Gs-Path ~ {"^/admin"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    if (req.http.X-Gs-Path ~ {"^/cart"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    if (req.http.X-Gs-Path ~ {"^/checkout"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    if (req.http.X-Gs-Path ~ {"^/my-account"}) {
        set req.http.X-Gs-Reason = "never_cache";
        call gearshift_drop_session;
        return (pass);
    }
    unset req.http.X-Gs-Path;

    # Headers that make the answer user- or request-specific: credentials
    # always, and profiles.pass_headers (a nonce, a token).
    if (req.http.Authorization) {
        set req.http.X-Gs-Reason = "pass_header" + " header=Authorization";
        return (pass);
    }
    if (req.http.X-WP-Nonce) {
        set req.http.X-Gs-Reason = "pass_header" + " header=X-WP-Nonce";
        return (pass);
    }
    if (req.http.X-CSRF-Token) {
        set req.http.X-Gs-Reason = "pass_header" + " header=X-CSRF-Token";
        return (pass);
    }

    # Static objects: the same for everyone, cookies are noise.
    if (req.url ~ {"(?i)^[^?#]*\.(?:png|gif|jpg|jpeg|ico|svg|webp|css|js|woff|woff2|ttf|swf|mp4|pdf)(?:[?#].*)?$"}) {
        unset req.http.Cookie;
        unset req.http.X-Gs-Session;
        return (hash);
    }

    # An anonymous page: when the backend fails or is full, its stored
    # copy is served (profiles.stale_if_error): see vcl_deliver.
    if (!req.http.X-Gs-Session) {
        set req.http.X-Gs-Anon = "1";
        if (req.http.X-Gs-Stale) {
            set req.grace = 10m;
        } else if (!std.healthy(gearshift_probe)) {
            # The probe finds the backend sick: copies within
            # stale_if_error count, and a fetch with one to fall back on
            # waits the probe's timeout at most (vcl_backend_fetch).
            set req.http.X-Gs-Sick = "1";
            set req.grace = 10m;
        }
    }
}
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
    if (req.http.X-Gs-Over) {
        return (synth(429, "Too Many Requests"));
    }
    return (synth(503, "Backend fetch failed"));
}


# The client a budget counts (profiles.client_budget): the peer, or, from
# a proxy of trusted_proxies, the address that proxy got the request from
# (X-Forwarded-For, right to left: Varnish appended the peer itself,
# and what a visitor wrote on the left is never reached while a proxy's
# entry follows it). Four proxies deep at most. A client of purge_acl
# has no budget: X-Gs-Client is left unset.
sub gearshift_client {
    set req.http.X-Gs-Client = client.ip;
    if (client.ip ~ gearshift_trusted) {
        set req.http.X-Gs-Hops = regsub(req.http.X-Forwarded-For, "\s*,?[^,]*$", "");
        if (req.http.X-Gs-Hops ~ "[^\s,]" && std.ip(req.http.X-Gs-Client, "0.0.0.0", false) ~ gearshift_trusted) {
            set req.http.X-Gs-Client = regsub(req.http.X-Gs-Hops, "^(?:.*,)?\s*([^,\s]*)\s*$", "\1");
            set req.http.X-Gs-Hops = regsub(req.http.X-Gs-Hops, "\s*,?[^,]*$", "");
        }
        if (req.http.X-Gs-Hops ~ "[^\s,]" && std.ip(req.http.X-Gs-Client, "0.0.0.0", false) ~ gearshift_trusted) {
            set req.http.X-Gs-Client = regsub(req.http.X-Gs-Hops, "^(?:.*,)?\s*([^,\s]*)\s*$", "\1");
            set req.http.X-Gs-Hops = regsub(req.http.X-Gs-Hops, "\s*,?[^,]*$", "");
        }
        if (req.http.X-Gs-Hops ~ "[^\s,]" && std.ip(req.http.X-Gs-Client, "0.0.0.0", false) ~ gearshift_trusted) {
            set req.http.X-Gs-Client = regsub(req.http.X-Gs-Hops, "^(?:.*,)?\s*([^,\s]*)\s*$", "\1");
            set req.http.X-Gs-Hops = regsub(req.http.X-Gs-Hops, "\s*,?[^,]*$", "");
        }
        if (req.http.X-Gs-Hops ~ "[^\s,]" && std.ip(req.http.X-Gs-Client, "0.0.0.0", false) ~ gearshift_trusted) {
            set req.http.X-Gs-Client = regsub(req.http.X-Gs-Hops, "^(?:.*,)?\s*([^,\s]*)\s*$", "\1");
            set req.http.X-Gs-Hops = regsub(req.http.X-Gs-Hops, "\s*,?[^,]*$", "");
        }
        unset req.http.X-Gs-Hops;
    }
    if (std.ip(req.http.X-Gs-Client, "0.0.0.0", false) ~ gearshift_purgers) {
        unset req.http.X-Gs-Client;
    }
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
            if (req.http.X-Gs-Client ~ "::" && req.http.X-Gs-Client !~ "^([^:]*:){8}") {
                set req.http.X-Gs-Client = regsub(req.http.X-Gs-Client, "::", ":0::");
            }
            if (req.http.X-Gs-Client ~ "::" && req.http.X-Gs-Client !~ "^([^:]*:){8}") {
                set req.http.X-Gs-Client = regsub(req.http.X-Gs-Client, "::", ":0::");
            }
            if (req.http.X-Gs-Client ~ "::" && req.http.X-Gs-Client !~ "^([^:]*:){8}") {
                set req.http.X-Gs-Client = regsub(req.http.X-Gs-Client, "::", ":0::");
            }
            if (req.http.X-Gs-Client ~ "::" && req.http.X-Gs-Client !~ "^([^:]*:){8}") {
                set req.http.X-Gs-Client = regsub(req.http.X-Gs-Client, "::", ":0::");
            }
            if (req.http.X-Gs-Client ~ "::" && req.http.X-Gs-Client !~ "^([^:]*:){8}") {
                set req.http.X-Gs-Client = regsub(req.http.X-Gs-Client, "::", ":0::");
            }
            if (req.http.X-Gs-Client ~ "::" && req.http.X-Gs-Client !~ "^([^:]*:){8}") {
                set req.http.X-Gs-Client = regsub(req.http.X-Gs-Client, "::", ":0::");
            }
            set req.http.X-Gs-Client = regsub(regsub(req.http.X-Gs-Client, "::", ":"), "^(([^:]*:){3}[^:]*).*$", "\1") + "::/64";
        }
    }
}

# A miss or a pass costs the backend a request: a client over its budget
# gets a stored copy when there is one (asked for again from the cache
# alone, as for stale_if_error), else 429 with Retry-After. Counted once
# per request, whatever its restarts. Nor may one client hold more than
# 75 of the backend's connections at once (half of
# backend.max_connections): a request in flight holds a token of its
# own bucket until its answer comes (gearshift_landed); a token lost on
# the way comes back within 150m.
sub gearshift_budget {
    if (req.http.X-Gs-Client && !req.http.X-Gs-Budget) {
        set req.http.X-Gs-Budget = "1";
        if (vsthrottle.is_denied("gearshift:" + req.http.X-Gs-Client, 100, 10s)) {
            set req.http.X-Gs-Over = "client=" + req.http.X-Gs-Client;
        } elsif (vsthrottle.is_denied("gearshift-flight:" + req.http.X-Gs-Client, 75, 150m)) {
            set req.http.X-Gs-Over = "client=" + req.http.X-Gs-Client + " in_flight=75";
        } else {
            set req.http.X-Gs-Flight = req.http.X-Gs-Client;
        }
        if (req.http.X-Gs-Over) {
            set req.http.X-Gs-Reason = "over_budget" + " " + req.http.X-Gs-Over;
            std.log("gearshift-reason: " + req.http.X-Gs-Reason);
            unset req.http.X-Gs-Reason;
            if (req.http.X-Gs-Anon && req.restarts < 3) {
                set req.http.X-Gs-Stale = "1";
                return (restart);
            }
            return (synth(429, "Too Many Requests"));
        }
    }
}

# The answer to a request gearshift_budget let go to the backend has
# come: its client has one fewer in flight.
sub gearshift_landed {
    if (req.http.X-Gs-Flight) {
        vsthrottle.return_token("gearshift-flight:" + req.http.X-Gs-Flight, 75, 150m);
        unset req.http.X-Gs-Flight;
    }
}

# Marks a session's uncacheable request: once it is answered, vcl_deliver
# drops the objects tagged with that session (X-Gs-Sid), in whatever gear
# cached them: by xkey's tag with varnish-modules, else by a ban. Other
# sessions' and anonymous objects are not touched.
sub gearshift_drop_session {
    if (req.http.X-Gs-Session) {
        set req.http.X-Gs-Drop = regsuball(req.http.X-Gs-Session, "[^A-Za-z0-9_.=%-]", "_");
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
    # The query's parameters in one order, and no lone "?"
    # (profiles.sort_query): the backend still gets them as they came.
    if (req.url ~ {"\?(?:.*&)?([^=&]+)(?:=[^&]*)?&(?:.*&)?\1(?:[=&]|$)|\?.*(?:\[|%5[bB])"}) {
        set req.http.X-Gs-Key = req.url;
    } else {
        set req.http.X-Gs-Key = regsub(std.querysort(req.url), "\?$", "");
    }
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

# backend.session_reserve: 38 of the backend's 150
# connections are kept for logged-in users and writes. An anonymous
# visitor's fetch (no session, no Authorization, a GET or HEAD) goes to
# gearshift_copies and gearshift_spare, which hold 112 at most:
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

# What the lookup found stored (any variant), fresh or stale: marked
# stale, kept in grace (profiles.soft_purge). Then the next scheme.
sub gearshift_purge_stored {
    # A soft purge's TTL counts from when the PURGE came (req.time), and an
    # object whose TTL ends before it was stored is never served, not even
    # stale: the answer of a fetch the PURGE waited for would go. So the
    # TTL ends now (and a microsecond: the lookup that found it came after
    # it was stored).
    set req.http.X-Gs-Purged = purge.soft(now - req.time + 0.001ms);
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

sub vcl_hit {
    if (req.http.X-Gs-Purge) {
        call gearshift_purge_stored;
    }
    set req.http.X-Gs-Cache = "HIT";
    call gearshift_anon_fetch;
    if (obj.ttl <= 0s) {
        # Past its TTL, served in grace while a refresh runs: every gear
        # says so alike.
        set req.http.X-Gs-Cache = "STALE";
    }
    if (obj.http.X-Gs-Guest) {
        # A guest copy: its refresh is the daemon's check again.
        set req.http.X-Gs-Guest = "copy";
    }
    # The backend failed this request: any gear serves an anonymous
    # page's copy younger than stale_if_error rather than the error.
    if (req.http.X-Gs-Stale) {
        if (obj.age > 10m) {
            call gearshift_no_copy;
        }
        set req.http.X-Gs-Cache = "STALE";
        return (deliver);
    }
}

sub vcl_miss {
    if (req.http.X-Gs-Purge) {
        call gearshift_purge_stored;
    }
    if (req.is_hitmiss) {
        set req.http.X-Gs-Cache = "PASS";
    } else {
        set req.http.X-Gs-Cache = "MISS";
    }
    call gearshift_anon_fetch;
    if (req.http.X-Gs-Stale) {
        # No copy to serve for the failed request: its error, without
        # asking the backend again.
        call gearshift_no_copy;
    }
    call gearshift_budget;
}

sub vcl_pass {
    if (req.http.X-Gs-Purge) {
        # Uncacheable (a hit-for-pass): nothing stored to purge.
        call gearshift_purge_next;
    }
    set req.http.X-Gs-Cache = "PASS";
    call gearshift_anon_fetch;
    if (req.http.X-Gs-Stale) {
        call gearshift_no_copy;
    }
    call gearshift_budget;
}

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
    unset bereq.http.X-Gs-Site;
    unset bereq.http.X-Gs-Route;
    unset bereq.http.X-Gs-Site-Limit;
    unset bereq.http.X-Gs-Site-Flow;
    unset bereq.http.X-Gs-Held;
    unset bereq.http.X-Gs-Held-Anon;
    unset bereq.http.X-Gs-Held-Copy;
    unset bereq.http.X-Gs-Site-Copies;
    unset bereq.http.X-Gs-Site-Copies-Flow;
    if (bereq.http.X-Gs-Copy && !std.healthy(gearshift_probe)) {
        # A page with a copy to fall back on, and the probe finds the
        # backend sick: the visitor waits the probe's timeout at most, not
        # first_byte_timeout. A probe that is wrong (a URL that redirects)
        # costs nothing: a backend that answers is answered.
        set bereq.connect_timeout = 1s;
        set bereq.first_byte_timeout = 1s;
    }
    if (bereq.http.X-Gs-Copy || bereq.http.X-Gs-Anon-Fetch) {
        set bereq.backend = gearshift_copies;
    }
    if (bereq.http.X-Gs-Anon-Fetch && !bereq.http.X-Gs-Copy && !bereq.uncacheable && !bereq.is_bgfetch) {
        # A page with no stored copy to fall back on: the spare
        # connections first, which no refresh of a copy takes;
        # gearshift_copies once they are full (vcl_backend_error).
        set bereq.backend = gearshift_spare;
    } else if (bereq.retries > 0 && bereq.backend == gearshift_spare) {
        set bereq.backend = gearshift_copies;
    }
    unset bereq.http.X-Gs-Copy;
    unset bereq.http.X-Gs-Anon-Fetch;
    if (bereq.http.X-Gs-Guest == "ask") {
        # The daemon said no, or could not be reached: the backend.
        set bereq.http.X-Gs-Guest = "asked";
        # An anonymous page (no cookie): the anonymous visitors' share.
        set bereq.backend = gearshift_copies;
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
    if (bereq.uncacheable) {
        # A pass: the client side said why (gearshift_recv, a gear's
        # vcl_recv). A fetch for the cache says it once answered: see
        # gearshift_reason.
        std.log("gearshift-reason: " + bereq.http.X-Gs-Reason);
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
            set bereq.http.X-Gs-Reason = bereq.http.Cookie;
            set bereq.http.X-Gs-Reason = "session" + " " + "cookie=" + regsub(bereq.http.X-Gs-Reason, {"(?s)^\s*([^=;\s]*).*$"}, "\1");
        } else if (bereq.is_bgfetch) {
            set bereq.http.X-Gs-Reason = "expired";
        } else if (bereq.is_hitmiss) {
            set bereq.http.X-Gs-Reason = "hit_for_miss";
        } else if (bereq.url ~ {"(?i)^[^?#]*\.(?:png|gif|jpg|jpeg|ico|svg|webp|css|js|woff|woff2|ttf|swf|mp4|pdf)(?:[?#].*)?$"}) {
            set bereq.http.X-Gs-Reason = "static_miss";
        } else {
            set bereq.http.X-Gs-Reason = "miss";
        }
    }
    std.log("gearshift-reason: " + bereq.http.X-Gs-Reason);
}

sub vcl_backend_error {
    if (bereq.http.X-Gs-Guest == "ask") {
        # The daemon cannot be reached: the backend, at once.
        std.log("gearshift-guest: no");
        return (retry);
    }
    if (bereq.backend == gearshift_spare && bereq.retries == 0 && now - bereq.time < 1s) {
        # The spare connections were full (refused at once): the rest
        # of the anonymous visitors' share, gearshift_copies.
        return (retry);
    }
    if (!bereq.uncacheable) {
        call gearshift_reason;
        if (bereq.is_bgfetch) {
            # Keep serving the stale copy.
            return (abandon);
        }
        if (!bereq.http.Cookie) {
            # An anonymous fetch for the cache that failed (refused,
            # timed out, over max_connections): abandoned, so that the
            # copy it would have replaced stays for vcl_synth to serve.
            return (abandon);
        }
    }
}

# Statuses a cache may keep without explicit freshness (RFC 9110 section
# 15.1 and Varnish's own list): only these get a TTL gearshift chooses.
sub gearshift_forced_ttl_status {
    if (beresp.status != 200 && beresp.status != 203 && beresp.status != 300 &&
        beresp.status != 301 && beresp.status != 302 && beresp.status != 304 &&
        beresp.status != 307 && beresp.status != 404 && beresp.status != 410 &&
        beresp.status != 414) {
        set bereq.http.X-Gs-Reason = "uncacheable_status" + " status=" + beresp.status;
        call gearshift_hit_for_miss;
    }
}

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

# A 5xx with no stale copy to keep leaves a short hit-for-miss marker: not
# cached as content, and within seconds requests queue behind a single
# fetch again. A long marker would send every request for the URL to a
# struggling backend at once, uncoalesced, for its whole TTL.
sub gearshift_error_marker {
    set bereq.http.X-Gs-Reason = "uncacheable_status" + " status=" + beresp.status;
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
        set bereq.http.X-Gs-Reason = "no_store" + " vary=*";
        call gearshift_hit_for_miss;
    }
    if (bereq.http.Cookie) {
        # A session's response that sets a cookie changes the session.
        if (beresp.http.Set-Cookie) {
            set bereq.http.X-Gs-Reason = "set_cookie" + " " + "cookie=" + regsub(beresp.http.Set-Cookie, {"(?s)^\s*([^=;\s]*).*$"}, "\1");
            call gearshift_hit_for_miss;
        }
    } else if (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])private\b") {
        # For one user: an anonymous copy would be everyone's.
        set bereq.http.X-Gs-Reason = "private";
        call gearshift_hit_for_miss;
    }
}

# The backend says a cache must not store it: no-store in Surrogate-Control,
# or in Cache-Control when there is no Surrogate-Control.
sub gearshift_no_store {
    if (beresp.http.Surrogate-Control ~ "(?i)(^|[,\s])no-store\b" ||
        (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])no-store\b")) {
        if (!bereq.http.X-Gs-Stripped) {
            set bereq.http.X-Gs-Reason = "no_store";
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
        call gearshift_strip_set_cookies;
        if (beresp.http.Set-Cookie) {
            set bereq.http.X-Gs-Reason = "set_cookie" + " " + "cookie=" + regsub(beresp.http.Set-Cookie, {"(?s)^\s*([^=;\s]*).*$"}, "\1");
            call gearshift_hit_for_miss;
        }
    }
}

# Removes the response's Set-Cookie headers when every one of them sets a
# cookie that may be stripped, and only from a response heavy then
# stores: one it passes anyway (private, Vary: *, no-store without the
# opt-in) keeps its cookies, or its visitor would lose the session for no
# caching gain (a login form would fail). VCL sees only the first of
# several headers, so they are joined to be read; when one of them must
# stay, the joined header cannot be sent, and the object is fetched again
# (X-Gs-Unstripped) to go to its visitor as it came.
sub gearshift_strip_set_cookies {
    if (bereq.http.X-Gs-Unstripped || beresp.http.Set-Cookie !~ {"^\s*(?:_ga|_ga_[^\s;=]*|_gid|_gat|_gat_[^\s;=]*|_gcl_[^\s;=]*|__utma|__utmb|__utmc|__utmt|__utmt_[^\s;=]*|__utmz|__utmv|_dc_gtm_[^\s;=]*|_fbp|_fbc|_clck|_clsk|_uetsid|_uetvid|_hjSessionUser_[^\s;=]*|_hjSession_[^\s;=]*|_hjid|_hjFirstSeen|_hjIncludedInSessionSample[^\s;=]*|_hjIncludedInPageviewSample|_hjAbsoluteSessionInProgress|_hjTLDTest|_pk_id\.[^\s;=]*|_pk_ses\.[^\s;=]*|_pk_ref\.[^\s;=]*|_pk_cvar\.[^\s;=]*|_pk_hsr\.[^\s;=]*|__hstc|__hssc|__hssrc|hubspotutk|_ttp|_pin_unauth|li_gc|_tt_enable_cookie|CookieConsent|OptanonConsent|OptanonAlertBoxClosed|cookieyes\-consent|cmplz_[^\s;=]*|cookielawinfo\-[^\s;=]*|viewed_cookie_policy|euconsent\-v2|wordpress_test_cookie|wp_lang|has_js)="}) {
        return;
    }
    if (beresp.http.Vary == "*" ||
        (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])private\b") ||
        beresp.http.Surrogate-Control ~ "(?i)(^|[,\s])no-store\b" ||
        (!beresp.http.Surrogate-Control && beresp.http.Cache-Control ~ "(?i)(^|[,\s])no-store\b")) {
        return;
    }
    std.collect(beresp.http.Set-Cookie, {"
"});
    if (beresp.http.Set-Cookie ~ {"(^|\n)\s*+(?!(?:_ga|_ga_[^\s;=]*|_gid|_gat|_gat_[^\s;=]*|_gcl_[^\s;=]*|__utma|__utmb|__utmc|__utmt|__utmt_[^\s;=]*|__utmz|__utmv|_dc_gtm_[^\s;=]*|_fbp|_fbc|_clck|_clsk|_uetsid|_uetvid|_hjSessionUser_[^\s;=]*|_hjSession_[^\s;=]*|_hjid|_hjFirstSeen|_hjIncludedInSessionSample[^\s;=]*|_hjIncludedInPageviewSample|_hjAbsoluteSessionInProgress|_hjTLDTest|_pk_id\.[^\s;=]*|_pk_ses\.[^\s;=]*|_pk_ref\.[^\s;=]*|_pk_cvar\.[^\s;=]*|_pk_hsr\.[^\s;=]*|__hstc|__hssc|__hssrc|hubspotutk|_ttp|_pin_unauth|li_gc|_tt_enable_cookie|CookieConsent|OptanonConsent|OptanonAlertBoxClosed|cookieyes\-consent|cmplz_[^\s;=]*|cookielawinfo\-[^\s;=]*|viewed_cookie_policy|euconsent\-v2|wordpress_test_cookie|wp_lang|has_js)=)"}) {
        set bereq.http.X-Gs-Unstripped = "1";
        return (retry);
    }
    unset beresp.http.Set-Cookie;
}

# For BAN and PURGE: lets the ban lurker match objects without a request.
sub gearshift_ban_fields {
    # The backend's tags, xkey and Surrogate-Key, in one xkey header: what
    # xkey indexes, and what a ban on tags matches without it.
    std.collect(beresp.http.xkey, " ");
    if (beresp.http.Surrogate-Key) {
        set beresp.http.xkey = beresp.http.xkey + " " + beresp.http.Surrogate-Key;
    }
    if (bereq.url ~ {"\?(?:.*&)?([^=&]+)(?:=[^&]*)?&(?:.*&)?\1(?:[=&]|$)|\?.*(?:\[|%5[bB])"}) {
        set beresp.http.X-Gs-Url = bereq.url;
    } else {
        set beresp.http.X-Gs-Url = regsub(std.querysort(bereq.url), "\?$", "");
    }
    set beresp.http.X-Gs-Host = regsub(std.tolower(regsub(bereq.http.Host, ":[0-9]+$", "")), "^www\.", "");
}

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
        beresp.http.X-Gs-Guest-Secret != "redacted0guest0secret0of0the0running0daemon") {
        unset beresp.http.X-Gs-Guest-Secret;
        # Not a backend request: readers of the reason log leave it out.
        std.log("gearshift-guest: no");
        return (retry);
    }
    unset beresp.http.X-Gs-Guest-Secret;
    unset beresp.http.Set-Cookie;
    call gearshift_ban_fields;
    set beresp.http.X-Gs-Guest = "1";
    set beresp.http.X-Gs-Gear = "heavy";
    set beresp.ttl = 2m;
    set beresp.grace = 10m;
    set bereq.http.X-Gs-Reason = "guest";
    call gearshift_reason;
    return (deliver);
}

# Shared by every gear: passes, static objects, and redirects that would
# loop once cached. A gear's vcl_backend_response handles the rest.
sub gearshift_backend_response {
    if (bereq.uncacheable) {
        return (deliver);
    }
    if (beresp.status >= 500 && bereq.is_bgfetch) {
        # Keep serving the stale copy.
        set bereq.http.X-Gs-Reason = "uncacheable_status" + " status=" + beresp.status;
        call gearshift_reason;
        return (abandon);
    }
    call gearshift_ban_fields;

    if (bereq.url ~ {"(?i)^[^?#]*\.(?:png|gif|jpg|jpeg|ico|svg|webp|css|js|woff|woff2|ttf|swf|mp4|pdf)(?:[?#].*)?$"}) {
        if (beresp.status >= 500) {
            call gearshift_error_marker;
        }
        call gearshift_forced_ttl_status;
        call gearshift_no_store;
        # The same file for everyone: a cookie it would set is dropped.
        unset beresp.http.Set-Cookie;
        set beresp.ttl = 1h;
        call gearshift_reason;
        return (deliver);
    }

    # www.example.com, example.com and example.com:8081 share a cache key:
    # a redirect from one to another, cached, would send the client round
    # in circles; and a redirect that names the site with the port or the
    # name the visitor sent ("Host: example.com:31337", which the backend
    # sees as sent) would send every visitor of the key there. A redirect
    # within the site is shared only when it names the site as the key
    # does (or by path alone).
    if (beresp.status >= 300 && beresp.status < 400 && beresp.http.Location ~ "^([a-zA-Z][a-zA-Z0-9+.-]*:)?//") {
        set beresp.http.X-Gs-Location = std.tolower(regsub(beresp.http.Location, "^[^/]*//([^/?#]*).*$", "\1"));
        if (regsub(std.tolower(regsub(beresp.http.X-Gs-Location, ":[0-9]+$", "")), "^www\.", "") == beresp.http.X-Gs-Host &&
            (beresp.http.X-Gs-Location != std.tolower(bereq.http.Host) || beresp.http.X-Gs-Location != beresp.http.X-Gs-Host)) {
            unset beresp.http.X-Gs-Location;
            set bereq.http.X-Gs-Reason = "uncacheable_status" + " status=" + beresp.status;
            call gearshift_hit_for_miss;
        }
        unset beresp.http.X-Gs-Location;
    }
    if (beresp.status >= 500 && !bereq.http.Cookie) {
        # An anonymous page's error: abandoned, so that the copy it would
        # replace stays for vcl_synth to serve (stale_if_error); a 5xx is
        # never stored as the page.
        set bereq.http.X-Gs-Reason = "uncacheable_status" + " status=" + beresp.status;
        call gearshift_reason;
        return (abandon);
    }
}

sub vcl_deliver {
    call gearshift_landed;
    call gearshift_stale_if_error;
    if (req.http.X-Gs-Drop) {
        # The session's write is done: its cached pages go, so its next
        # request sees what it wrote (read-your-own-writes).
        # Its pages carry the tag gs-sid:<session>: dropped at the cost of
        # their number, with no ban for every later lookup to test.
        set req.http.X-Gs-Drop = xkey.purge("gs-sid:" + req.http.X-Gs-Drop);
        unset req.http.X-Gs-Drop;
    }
    unset resp.http.X-Gs-Url;
    unset resp.http.X-Gs-Host;
    unset resp.http.X-Gs-Gear;
    unset resp.http.X-Gs-Sid;
    unset resp.http.X-Gs-Grace;
    unset resp.http.X-Gs-Guest;
    unset resp.http.xkey;
    set resp.http.X-Gearshift-Profile = "heavy";
    if (req.http.X-Gs-Cache) {
        set resp.http.X-Cache = req.http.X-Gs-Cache;
    } else {
        set resp.http.X-Cache = "PASS";
    }
}

sub vcl_synth {
    call gearshift_landed;
    call gearshift_stale_if_error;
    set resp.http.X-Gearshift-Profile = "heavy";
    set resp.http.X-Cache = "PASS";
    if (resp.status == 429 && req.http.X-Gs-Over) {
        # Answered here: Varnish's own vcl_synth would say to come back
        # in 5 s.
        set resp.http.Retry-After = "1";
        set resp.http.Content-Type = "text/plain; charset=utf-8";
        set resp.body = "Too many requests: try again in 1 s." + {"
"};
        return (deliver);
    }
}

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
    if (!req.http.X-Gs-Stale && !req.http.X-Gs-Sick) {
        # A copy is kept for stale_if_error (10m of grace);
        # heavy serves it while it refreshes for heavy_grace alone.
        set req.grace = 10m;
    }
    return (hash);
}

sub vcl_backend_response {
    if (bereq.http.X-Gs-Guest == "ask") {
        call gearshift_guest_answer;
    }
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
        set bereq.http.X-Gs-Session = bereq.http.Cookie;
        set beresp.http.X-Gs-Sid = regsuball(bereq.http.X-Gs-Session, "[^A-Za-z0-9_.=%-]", "_");
        set beresp.http.xkey = beresp.http.xkey + " gs-sid:" + beresp.http.X-Gs-Sid;
        unset bereq.http.X-Gs-Session;
        if (beresp.ttl < 30s) {
            set beresp.ttl = 30s;
        }
    } else {
        # Anonymous: whatever Cache-Control and Expires say about
        # freshness (no-cache, max-age=0, a past Expires).
        if (beresp.ttl < 2m) {
            set beresp.ttl = 2m;
        }
    }
    if (bereq.http.Cookie) {
        set beresp.grace = 10m;
    } else {
        set beresp.grace = 10m;
    }
    # Lets the lighter gears recognise what only heavy would cache.
    set beresp.http.X-Gs-Gear = "heavy";
    call gearshift_reason;
    return (deliver);
}


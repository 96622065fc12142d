package guest

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// ClientHeader is the ask's header naming the visitor whose request it
// is, as heavy's VCL computed it: an IPv4 address or an IPv6 /64
// ("2001:db8:1:2::/64"). Without it (or when it is no address), the last
// entry of X-Forwarded-For, then the ask's peer, names the client.
const ClientHeader = "X-Gs-Client"

// Limits of one client's checks, besides everyone's (ChecksPerMinute,
// maxInFlight): one client cannot spend the checks of all.
const (
	// clientChecksPerMinute bounds one client's checks: a visitor
	// reads a page or two a minute, the first view of each asks.
	clientChecksPerMinute = 10
	// clientBurst lets a visitor open a few pages at once.
	clientBurst = 5
	// clientInFlight bounds one client's checks running at once: its
	// asks for slow pages cannot hold every check.
	clientInFlight = 1
	// maxClients bounds the budgets kept; beyond it, once the idle
	// ones are forgotten, a new client's ask is a no.
	maxClients = 10000
	// pruneEvery spaces the looks for idle budgets when there is no
	// room: a flood of new clients scans the budgets once a second,
	// not once an ask.
	pruneEvery = time.Second
)

// budgets are the clients' budgets, by client. Server.mu guards them.
type budgets struct {
	max    int
	m      map[netip.Prefix]*budget
	pruned time.Time // the last look for idle budgets
}

// budget is one client's: its checks a minute and its checks running.
type budget struct {
	limit   *rate.Limiter
	running int
}

// get returns client's budget, a full one for a client not seen, or nil
// when there is no room for one.
func (bs *budgets) get(client netip.Prefix, now time.Time) *budget {
	if b := bs.m[client]; b != nil {
		return b
	}
	if len(bs.m) >= bs.max && !bs.prune(now) {
		return nil
	}
	b := &budget{limit: rate.NewLimiter(rate.Limit(clientChecksPerMinute)/60, clientBurst)}
	bs.m[client] = b
	return b
}

// prune forgets the budgets of idle clients, no check running and their
// budget full again: a new one would be the same. It tells whether there
// is room for one more.
func (bs *budgets) prune(now time.Time) bool {
	if now.Sub(bs.pruned) < pruneEvery {
		return false
	}
	bs.pruned = now
	for client, b := range bs.m {
		if b.running == 0 && b.limit.TokensAt(now) >= clientBurst {
			delete(bs.m, client)
		}
	}
	return len(bs.m) < bs.max
}

// admit takes a check from client's budget and from everyone's, and
// counts it running; or says why not, taking nothing. s.mu is held.
func (s *Server) admit(client netip.Prefix, now time.Time) (*budget, string) {
	b := s.clients.get(client, now)
	switch {
	case b == nil:
		return nil, "too many clients"
	case b.running >= clientInFlight:
		return nil, "the client's check running"
	case s.running >= maxInFlight:
		return nil, "checks busy"
	case b.limit.TokensAt(now) < 1:
		return nil, "over the client's check budget"
	case s.limit.TokensAt(now) < 1:
		return nil, "over the check budget"
	}
	b.limit.AllowN(now, 1)
	s.limit.AllowN(now, 1)
	b.running++
	s.running++
	return b, ""
}

// clientOf is the client an ask counts for: ClientHeader, else the last
// entry of X-Forwarded-For (Varnish's peer), else the ask's peer. Asks
// naming none count as one client, the zero Prefix.
func clientOf(r *http.Request) netip.Prefix {
	if c, ok := parseClient(r.Header.Get(ClientHeader)); ok {
		return c
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		last := xff[len(xff)-1]
		if i := strings.LastIndexByte(last, ','); i >= 0 {
			last = last[i+1:]
		}
		if c, ok := parseClient(strings.TrimSpace(last)); ok {
			return c
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	c, _ := parseClient(host)
	return c
}

// parseClient reads an address or a prefix as a client: an IPv4 address
// (an IPv4-mapped IPv6 one is its IPv4 address), or an IPv6 /64, which
// one visitor holds whole.
func parseClient(s string) (netip.Prefix, bool) {
	var a netip.Addr
	if p, err := netip.ParsePrefix(s); err == nil {
		a = p.Masked().Addr()
	} else if a, err = netip.ParseAddr(s); err != nil {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32), true
	}
	p, err := a.Prefix(64)
	return p, err == nil
}

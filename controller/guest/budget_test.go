package guest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// One client spends its own budget, not everyone's, and a no for being
// over it is no verdict about the page.
func TestOneClientCannotSpendTheBudget(t *testing.T) {
	s := newSite(t)
	g, c := newServer(t, s)
	const greedy = "203.0.113.7"
	shared := 0
	for i := range 20 {
		if askFrom(t, g, greedy, fmt.Sprintf("/article?n=%d", i)).Header.Get(Header) == Shared {
			shared++
		}
	}
	if shared != clientBurst {
		t.Errorf("one client's 20 asks for distinct pages: %d checked, want %d", shared, clientBurst)
	}
	before := s.requests.Load()
	resp := askFrom(t, g, "198.51.100.20", "/article?n=19")
	if resp.Header.Get(Header) != Shared || s.requests.Load()-before != 2 {
		t.Errorf("another client, for a page the first was refused: %s %q (%s), %d backend requests, want it checked and shared",
			Header, resp.Header.Get(Header), resp.Header.Get("X-Gs-Guest-Why"), s.requests.Load()-before)
	}
	c.add(time.Minute)
	if resp := askFrom(t, g, greedy, "/article?n=18"); resp.Header.Get(Header) != Shared {
		t.Errorf("the first client a minute later: %s %q (%s), want its budget back",
			Header, resp.Header.Get(Header), resp.Header.Get("X-Gs-Guest-Why"))
	}
}

// One client's asks for slow pages hold one check at a time: another
// client's ask is still checked.
func TestOneClientHoldsOneCheck(t *testing.T) {
	s := newSite(t)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	for i := range 5 {
		s.set(fmt.Sprintf("/slow%d", i), func(string) string {
			<-release
			return "<p>slow but the same</p>"
		})
	}
	g, _ := newServer(t, s)
	results := make(chan string, 5)
	askSlow := func(client string, i int) {
		go func() {
			resp := askFrom(t, g, client, fmt.Sprintf("/slow%d", i))
			results <- resp.Header.Get(Header)
		}()
	}
	for i := range 4 {
		askSlow("203.0.113.9", i)
	}
	timeout := time.After(5 * time.Second)
	for range 3 {
		select {
		case r := <-results:
			if r != No {
				t.Errorf("a second check for one client: %s %q, want no", Header, r)
			}
		case <-timeout:
			t.Fatal("one client's 4 asks for slow pages: more than one waits for a check")
		}
	}
	askSlow("198.51.100.30", 4)
	for deadline := time.Now().Add(5 * time.Second); s.requests.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("another client's ask: %d backend requests, want its check at the backend", s.requests.Load())
		}
		time.Sleep(time.Millisecond)
	}
	free()
	for range 2 {
		if r := <-results; r != Shared {
			t.Errorf("a check run: %s %q, want shared", Header, r)
		}
	}
}

// A client is an IPv4 address or an IPv6 /64, however it is written and
// wherever it is read from.
func TestOneClientOneBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		via     string // where the ask names the client
		clients []string
		other   string // another client
	}{
		{"IPv6 of one /64", ClientHeader,
			[]string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"}, "2001:db8:1:3::1"},
		{"IPv4 and IPv4-mapped IPv6", ClientHeader, []string{"192.0.2.44", "::ffff:192.0.2.44"}, "192.0.2.45"},
		{"X-Forwarded-For's last entry", "X-Forwarded-For",
			[]string{"198.51.100.1, 192.0.2.60", "10.9.9.9,192.0.2.60", "192.0.2.60", "2001:db8::1, ::ffff:192.0.2.60"}, "192.0.2.61"},
		{"the peer", "RemoteAddr", []string{"[2001:db8:5:6::1]:4000", "[2001:db8:5:6::2]:4001"}, "[2001:db8:5:7::1]:4000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSite(t)
			g, _ := newServer(t, s)
			from := func(client, path string) *http.Response {
				return askWith(t, g, path, func(r *http.Request) {
					r.Header.Del("X-Forwarded-For")
					r.Header.Set(ClientHeader, "unknown")
					switch tc.via {
					case "RemoteAddr":
						r.Header.Del(ClientHeader)
						r.RemoteAddr = client
					default:
						r.Header.Set(tc.via, client)
					}
				})
			}
			shared := 0
			for i := range 2 * clientBurst {
				if from(tc.clients[i%len(tc.clients)], fmt.Sprintf("/article?n=%d", i)).Header.Get(Header) == Shared {
					shared++
				}
			}
			if shared != clientBurst {
				t.Errorf("%d asks of one client written %d ways: %d checked, want %d", 2*clientBurst, len(tc.clients), shared, clientBurst)
			}
			if resp := from(tc.other, "/article"); resp.Header.Get(Header) != Shared {
				t.Errorf("another client: %s %q (%s), want it checked", Header, resp.Header.Get(Header), resp.Header.Get("X-Gs-Guest-Why"))
			}
		})
	}
}

func TestClientOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client string   // ClientHeader
		xff    []string // X-Forwarded-For lines
		peer   string   // RemoteAddr
		want   string   // "": the zero Prefix
	}{
		{"IPv6 /64 as heavy writes it", "2001:db8:1:2::/64", nil, "127.0.0.1:1", "2001:db8:1:2::/64"},
		{"IPv6 address", "2001:db8:1:2:aaaa:bbbb:cccc:dddd", nil, "127.0.0.1:1", "2001:db8:1:2::/64"},
		{"a wider IPv6 prefix", "2001:db8:1:2::/48", nil, "127.0.0.1:1", "2001:db8:1::/64"},
		{"IPv6 address with a zone", "fe80::1%eth0", nil, "127.0.0.1:1", "fe80::/64"},
		{"IPv4 address", "192.0.2.1", nil, "127.0.0.1:1", "192.0.2.1/32"},
		{"IPv4-mapped IPv6", "::ffff:192.0.2.1", nil, "127.0.0.1:1", "192.0.2.1/32"},
		{"no address: X-Forwarded-For's last entry", "unknown", []string{"198.51.100.1, 192.0.2.7"}, "127.0.0.1:1", "192.0.2.7/32"},
		{"X-Forwarded-For on two lines", "", []string{"198.51.100.1", "10.0.0.1,  2001:db8::9 "}, "127.0.0.1:1", "2001:db8::/64"},
		{"X-Forwarded-For ending in a comma: the peer", "", []string{"198.51.100.1,"}, "192.0.2.9:1000", "192.0.2.9/32"},
		{"the peer, IPv6", "", nil, "[2001:db8:9::5]:443", "2001:db8:9::/64"},
		{"nothing", "", nil, "@", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.peer
			if tc.client != "" {
				r.Header.Set(ClientHeader, tc.client)
			}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			var want netip.Prefix
			if tc.want != "" {
				want = netip.MustParsePrefix(tc.want)
			}
			if got := clientOf(r); got != want {
				t.Errorf("client %v, want %v", got, want)
			}
		})
	}
}

// The budgets kept are bounded: an idle client's is forgotten when room
// is needed, a busy one's is not, and beyond them an ask is a no.
func TestBudgetsBounded(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	client := func(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("192.0.2.%d/32", i)) }
	bs := budgets{max: 3, m: map[netip.Prefix]*budget{}}
	for i := range 3 {
		bs.get(client(i), now).limit.AllowN(now, 1)
	}
	if bs.get(client(3), now) != nil {
		t.Errorf("room for a fourth client beside 3 with budgets spent, want none")
	}
	now = now.Add(time.Minute)
	bs.pruned = now.Add(-pruneEvery / 2)
	if bs.get(client(3), now) != nil {
		t.Errorf("a look for idle clients %s after the last, want none until %s", pruneEvery/2, pruneEvery)
	}
	now = now.Add(pruneEvery)
	if bs.get(client(3), now) == nil || len(bs.m) != 1 {
		t.Errorf("once the others' budgets are full again: %d budgets kept, want the new client's alone", len(bs.m))
	}
	bs.m[client(3)].running = 1
	bs.get(client(4), now)
	bs.get(client(5), now)
	now = now.Add(time.Minute)
	if bs.get(client(6), now) == nil || bs.m[client(3)] == nil || len(bs.m) != 2 {
		t.Errorf("budgets kept %v, want the busy client's and the new one's", bs.m)
	}

	s := newSite(t)
	g, _ := newServer(t, s)
	g.clients.max = 2
	askFrom(t, g, "192.0.2.1", "/article")
	askFrom(t, g, "192.0.2.2", "/article")
	before := s.requests.Load()
	resp := askFrom(t, g, "192.0.2.3", "/article")
	if resp.Header.Get(whyHeader) != "too many clients" || s.requests.Load() != before {
		t.Errorf("a client beyond the budgets kept: %s %q (%s), %d backend requests, want a no without a check",
			Header, resp.Header.Get(Header), resp.Header.Get(whyHeader), s.requests.Load()-before)
	}
}

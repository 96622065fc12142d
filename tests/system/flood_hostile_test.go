package system

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// hostileEnv, when set, makes the test binary BenchmarkFlood's hostile
// client instead of a test run (TestMain): the value is a hostileOrder as
// JSON, each answer a hostileAnswer line of JSON on standard output. The
// flood comes from a process of its own, as an attacker's would: its
// goroutines, allocations and garbage collections are not those of the
// process that measures the ordinary visitors.
const hostileEnv = "GEARSHIFT_FLOOD_HOSTILE"

// hostileOrder is what the hostile process is to send.
type hostileOrder struct {
	Base, Host string
	Rate       int
	For        time.Duration
}

// hostileAnswer is one of the hostile client's answers.
type hostileAnswer struct {
	Code    uint16        `json:"code"`
	Cache   string        `json:"cache,omitempty"`
	Latency time.Duration `json:"latency"`
	Timeout bool          `json:"timeout,omitempty"`
}

// runHostile is the hostile process: the order's flood, open loop from
// hostileAddr, then every answer written out once the flood is over (no
// writing while the flood runs). It returns the exit code.
func runHostile(order string) int {
	var o hostileOrder
	if err := json.Unmarshal([]byte(order), &o); err != nil || o.Rate < 1 || o.For <= 0 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a JSON hostileOrder with a positive Rate and For (%v)\n", hostileEnv, order, err)
		return 2
	}
	mix := newSurgeMix(o.Base, o.Host, nil)
	l := newLoad(mix, hostileTransport())
	l.attack(l.attacker(64, 0), mix.hostile(), vegeta.ConstantPacer{Freq: o.Rate, Per: time.Second}, o.For, false)
	hits := l.wait()
	l.tr.CloseIdleConnections()
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	for _, h := range hits {
		if err := enc.Encode(hostileAnswer{Code: h.code, Cache: h.cache, Latency: h.latency, Timeout: h.timeout}); err != nil {
			fmt.Fprintln(os.Stderr, "hostile:", err)
			return 1
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		return 1
	}
	return 0
}

// hostileProcess is a running hostile process.
type hostileProcess struct {
	cmd *exec.Cmd
	out strings.Builder
}

// startHostile starts the hostile client at rate req/s for dur, against
// mix's site, in a process of its own.
func startHostile(tb testing.TB, mix *surgeMix, rate int, dur time.Duration) *hostileProcess {
	tb.Helper()
	order, err := json.Marshal(hostileOrder{Base: mix.base, Host: mix.host, Rate: rate, For: dur})
	if err != nil {
		tb.Fatal(err)
	}
	p := &hostileProcess{cmd: exec.Command(os.Args[0])}
	p.cmd.Env = append(os.Environ(), hostileEnv+"="+string(order))
	p.cmd.Stdout, p.cmd.Stderr = &p.out, os.Stderr
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("starting the hostile client: %v", err)
	}
	return p
}

// wait waits for the hostile process to end and returns its answers.
func (p *hostileProcess) wait(tb testing.TB) []hit {
	tb.Helper()
	if err := p.cmd.Wait(); err != nil {
		tb.Fatalf("the hostile client: %v", err)
	}
	var hits []hit
	sc := bufio.NewScanner(strings.NewReader(p.out.String()))
	for sc.Scan() {
		var a hostileAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			tb.Fatalf("the hostile client's answer %q: %v", sc.Text(), err)
		}
		hits = append(hits, hit{latency: a.Latency, code: a.Code, cache: a.Cache, timeout: a.Timeout, page: -1})
	}
	if len(hits) == 0 {
		tb.Fatal("the hostile client reported no answer")
	}
	return hits
}

// TestHostileProcess runs BenchmarkFlood's hostile client for a moment
// against a server that counts what reaches it: every request sent comes
// back as an answer, from hostileAddr, and of the flood's three kinds.
func TestHostileProcess(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		kind := "other"
		switch q := r.URL.Query(); {
		case r.Method == http.MethodPost && r.URL.Path == "/xmlrpc.php":
			kind = "xmlrpc"
		case q.Has("s"):
			kind = "search"
		case r.URL.RawQuery != "":
			kind = "query"
		}
		mu.Lock()
		seen[host]++
		seen[kind]++
		mu.Unlock()
		w.Header().Set("X-Cache", "MISS")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	const rate, dur = 50, time.Second
	hits := startHostile(t, newSurgeMix(srv.URL, "flood.test", nil), rate, dur).wait(t)
	if len(hits) != rate {
		t.Fatalf("%d answers reported, want %d", len(hits), rate)
	}
	for _, h := range hits {
		if h.code != http.StatusTooManyRequests || h.cache != "MISS" {
			t.Fatalf("an answer reported as %d %q, want 429 MISS", h.code, h.cache)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[hostileAddr] != rate {
		t.Errorf("%d requests from %s, want %d (all seen: %v)", seen[hostileAddr], hostileAddr, rate, seen)
	}
	for _, kind := range []string{"xmlrpc", "search", "query"} {
		if seen[kind] == 0 {
			t.Errorf("no %s request among %d (all seen: %v)", kind, rate, seen)
		}
	}
}

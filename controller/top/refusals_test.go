package top

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRefusalsWindow(t *testing.T) {
	var r Refusals
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 7 {
		r.Add(t0, "192.0.2.1")
		if i < 3 {
			r.Add(t0.Add(30*time.Second), "192.0.2.2")
		}
	}
	r.Add(t0.Add(59*time.Second), "192.0.2.3")
	st := r.Stats(t0.Add(59 * time.Second))
	if st.Requests != 11 || !slices.Equal(st.Clients, []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}) {
		t.Errorf("within the minute: %+v", st)
	}
	// A minute on, the first second's are gone.
	if st := r.Stats(t0.Add(60 * time.Second)); st.Requests != 4 || st.Clients[0] != "192.0.2.2" {
		t.Errorf("a minute on: %+v", st)
	}
	// One second's bucket holds maxRefusedClients clients; a flood of
	// addresses is counted, not kept.
	for i := range 10 * maxRefusedClients {
		r.Add(t0.Add(2*time.Minute), fmt.Sprintf("10.0.%d.%d", i/250, i%250))
	}
	st = r.Stats(t0.Add(2 * time.Minute))
	if st.Requests != 10*maxRefusedClients || len(st.Clients) != 5 {
		t.Errorf("a flood of addresses: %+v", st)
	}
	if n := len(r.buckets[t0.Add(2*time.Minute).Unix()%refusalWindow].clients); n > maxRefusedClients+1 {
		t.Errorf("one second holds %d clients", n)
	}
}

func TestParseRefusals(t *testing.T) {
	in := "         0 CLI            - Rd ping\n" +
		"     32770 VCL_Log        c gearshift-reason: over_budget client=192.0.2.5\n" +
		"     32771 VCL_Log        c gearshift-reason: miss\n" +
		"     32772 VCL_Log        c gearshift-reason: over_budget client=\n"
	var got []string
	if err := parseRefusals(strings.NewReader(in), func(c string) { got = append(got, c) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"192.0.2.5", Unknown}) {
		t.Errorf("parseRefusals = %q", got)
	}
}

// TestRefusalsFromVarnish: the daemon's reader of refusals counts a
// client over its budget (the default profiles.client_budget) by address.
func TestRefusalsFromVarnish(t *testing.T) {
	v, _ := startSite(t) // heavy
	var r Refusals
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (Log{Name: v.WorkDir}).WatchRefusals(ctx, &r, time.Now) }()
	get := func(c *http.Client, path string) int {
		t.Helper()
		resp, err := c.Get(v.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// varnishlog reads from where the log is when it attaches: another
	// client is refused until the reader has counted one of its refusals.
	probe := clientFrom("127.0.0.3")
	for i, deadline := 0, time.Now().Add(15*time.Second); refusalsOf(&r, "127.0.0.3") == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatal("the reader counted none of the probe's refusals")
		}
		if get(probe, fmt.Sprintf("/probe?s=%d", i)) == http.StatusTooManyRequests {
			time.Sleep(10 * time.Millisecond)
		}
	}
	from := clientFrom("127.0.0.2")
	refused := 0
	for i := range 250 {
		if get(from, fmt.Sprintf("/?s=%d", i)) == http.StatusTooManyRequests {
			refused++
		}
	}
	for deadline := time.Now().Add(10 * time.Second); refusalsOf(&r, "127.0.0.2") < refused && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := r.Stats(time.Now())
	if n := refusalsOf(&r, "127.0.0.2"); refused < 100 || n != refused || len(st.Clients) != 2 || st.Clients[0] != "127.0.0.2" {
		t.Errorf("%d refused; the reader counted %d of them, %+v in all", refused, n, st)
	}
}

// refusalsOf is the refusals r holds for client.
func refusalsOf(r *Refusals, client string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.buckets {
		n += b.clients[client]
	}
	return n
}

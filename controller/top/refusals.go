package top

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gearshift/gearshift/profiles"
)

// Refusals counts the requests the profiles refused for their client's
// budget (reason over_budget) over the last minute, by client, in bounded
// memory: a second's bucket holds at most maxRefusedClients clients, the
// rest counted as Other. Safe for concurrent use.
type Refusals struct {
	mu      sync.Mutex
	buckets [refusalWindow]refusalBucket
}

// refusalWindow is the seconds Refusals keeps.
const refusalWindow = 60

// maxRefusedClients bounds the clients of one second's bucket.
const maxRefusedClients = 100

type refusalBucket struct {
	sec     int64 // Unix seconds of this bucket; stale once older than the window
	clients map[string]int
}

// Add counts one refusal of client at now.
func (r *Refusals) Add(now time.Time, client string) {
	sec := now.Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.buckets[sec%refusalWindow]
	if b.sec != sec || b.clients == nil {
		b.sec, b.clients = sec, map[string]int{}
	}
	bump(b.clients, client, 1)
}

// RefusalStats is the last minute's refusals: how many, and the clients
// with the most, most first.
type RefusalStats struct {
	Requests int
	Clients  []string // at most 5
}

// Stats sums the buckets of the minute before now.
func (r *Refusals) Stats(now time.Time) RefusalStats {
	sec := now.Unix()
	sum := map[string]int{}
	var st RefusalStats
	r.mu.Lock()
	for _, b := range r.buckets {
		if b.sec <= sec-refusalWindow || b.sec > sec {
			continue
		}
		for c, n := range b.clients {
			sum[c] += n
			st.Requests += n
		}
	}
	r.mu.Unlock()
	for c := range sum {
		st.Clients = append(st.Clients, c)
	}
	slices.SortFunc(st.Clients, func(a, b string) int { return cmp.Or(cmp.Compare(sum[b], sum[a]), cmp.Compare(a, b)) })
	if len(st.Clients) > 5 {
		st.Clients = st.Clients[:5]
	}
	return st
}

// refusalRecord starts the VCL_Log record of a refusal.
var refusalRecord = profiles.ReasonLog + OverBudget + " "

// RefusalArgs are varnishlog's arguments for WatchRefusals: the raw
// records of refusals only, which varnishlog need not group, so it stays
// cheap under any traffic.
func (l Log) RefusalArgs() []string {
	return []string{"-n", l.Name, "-t", "0", "-g", "raw", "-i", "VCL_Log", "-I", "VCL_Log:^" + refusalRecord}
}

// WatchRefusals runs varnishlog until ctx ends and counts every refusal
// it reports into r, at the time it is read. Its errors are Watch's.
func (l Log) WatchRefusals(ctx context.Context, r *Refusals, now func() time.Time) error {
	return l.run(ctx, l.RefusalArgs(), func(rd io.Reader) error {
		return parseRefusals(rd, func(client string) { r.Add(now(), client) })
	})
}

// parseRefusals reads varnishlog's raw records ("  32770 VCL_Log  c
// gearshift-reason: over_budget client=192.0.2.5") and calls emit with
// each refusal's client.
func parseRefusals(rd io.Reader, emit func(client string)) error {
	br := bufio.NewReaderSize(rd, maxLine)
	for {
		line, err := readLine(br)
		if _, rest, ok := strings.Cut(string(line), refusalRecord); ok {
			client := Unknown
			for _, f := range strings.Fields(rest) {
				if c, ok := strings.CutPrefix(f, clientField); ok && c != "" {
					client = shorten(c, maxName)
				}
			}
			emit(client)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

package top

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// By is what requests are grouped by.
type By int

// The groupings, in the order a screen shows their columns.
const (
	ByURL By = iota
	ByReason
	ByCookie
	ByClient
	numBy
)

var byNames = [numBy]string{ByURL: "url", ByReason: "reason", ByCookie: "cookie", ByClient: "client"}

func (b By) String() string { return byNames[b] }

// ParseBy reads a grouping's name: url, reason, cookie or client.
func ParseBy(s string) (By, error) {
	for b, name := range byNames {
		if s == name {
			return By(b), nil
		}
	}
	return 0, fmt.Errorf("unknown grouping %q: want %s", s, strings.Join(byNames[:], ", "))
}

// key is the request's value in grouping b.
func (q Request) key(b By) string {
	var k string
	switch b {
	case ByURL:
		k = strings.TrimSpace(q.Method + " " + q.URL)
	case ByReason:
		k = q.Reason
	case ByCookie:
		k = q.Cookie
	case ByClient:
		k = q.Client
	}
	if k == "" {
		return Unknown
	}
	return k
}

// Memory bounds of a Tally: past MaxKeys distinct values of a grouping,
// or MaxSub distinct values of another grouping within one row, requests
// count under Other.
const (
	MaxKeys = 500
	MaxSub  = 16
	Other   = "(other)"
)

// Tally counts requests by every grouping at once, in bounded memory.
// The zero value is not usable: see NewTally.
type Tally struct {
	n    int
	rows [numBy]map[string]*row
}

// row counts the requests of one value of a grouping, and within them the
// values of the other groupings (the row's top URL, reason, …).
type row struct {
	n   int
	sub [numBy]map[string]int // nil for the row's own grouping
}

// NewTally returns an empty Tally.
func NewTally() *Tally {
	t := &Tally{}
	for b := range t.rows {
		t.rows[b] = map[string]*row{}
	}
	return t
}

// Add counts q.
func (t *Tally) Add(q Request) {
	t.n++
	for b := By(0); b < numBy; b++ {
		r := t.row(b, q.key(b))
		r.n++
		for o := By(0); o < numBy; o++ {
			if o != b {
				bump(r.sub[o], q.key(o), 1)
			}
		}
	}
}

// Merge adds the counts of u.
func (t *Tally) Merge(u *Tally) {
	t.n += u.n
	for b := By(0); b < numBy; b++ {
		for k, ur := range u.rows[b] {
			r := t.row(b, k)
			r.n += ur.n
			for o, m := range ur.sub {
				for sk, n := range m {
					bump(r.sub[o], sk, n)
				}
			}
		}
	}
}

func (t *Tally) row(b By, k string) *row {
	m := t.rows[b]
	r, ok := m[k]
	if ok {
		return r
	}
	if len(m) >= MaxKeys {
		k = Other
		if r, ok = m[k]; ok {
			return r
		}
	}
	r = &row{}
	for o := range r.sub {
		if By(o) != b {
			r.sub[o] = map[string]int{}
		}
	}
	m[k] = r
	return r
}

func bump(m map[string]int, k string, n int) {
	if _, ok := m[k]; !ok && len(m) >= MaxSub {
		k = Other
	}
	m[k] += n
}

// Requests returns how many requests were counted.
func (t *Tally) Requests() int { return t.n }

// Row is one line of a view: a value of the grouping, its requests and the
// most frequent value of each other grouping among them.
type Row struct {
	Key    string  `json:"key"`
	Count  int     `json:"count"`
	Rate   float64 `json:"rate"`  // requests per second
	Share  float64 `json:"share"` // of the backend requests, 0–1
	URL    string  `json:"url,omitempty"`
	Reason string  `json:"reason,omitempty"`
	Cookie string  `json:"cookie,omitempty"`
	Client string  `json:"client,omitempty"`
}

// Rows returns the n most frequent values of grouping b (all when n <= 0),
// most first, with rates over seconds.
func (t *Tally) Rows(b By, n int, seconds float64) []Row {
	rows := make([]Row, 0, len(t.rows[b]))
	for k, r := range t.rows[b] {
		row := Row{Key: k, Count: r.n, Rate: rate(r.n, seconds), Share: share(r.n, t.n)}
		for o, m := range r.sub {
			if m == nil {
				continue
			}
			top := topKey(m)
			switch By(o) {
			case ByURL:
				row.URL = top
			case ByReason:
				row.Reason = top
			case ByCookie:
				row.Cookie = top
			case ByClient:
				row.Client = top
			}
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key))
	})
	if n > 0 && len(rows) > n {
		rows = rows[:n]
	}
	return rows
}

// topKey is the most frequent key of m (the smallest of equals); an
// Unknown or Other key only when there is nothing else.
func topKey(m map[string]int) string {
	best, bestN := "", -1
	for k, n := range m {
		if k == Unknown || k == Other {
			continue
		}
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	if best == "" && len(m) > 0 {
		return Unknown
	}
	return best
}

func rate(n int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return round(float64(n) / seconds)
}

func share(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return math.Round(float64(n)/float64(total)*1e4) / 1e4
}

func round(f float64) float64 { return math.Round(f*100) / 100 }

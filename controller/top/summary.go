package top

import (
	"fmt"
	"math"

	"github.com/gearshift/gearshift/profiles"
)

// Summary is what reached a target's backend over a while, by reason: what
// advice is made of ("41 % session (cookie _my_tracker)").
type Summary struct {
	Target   string        `json:"target"`   // varnishd's -n
	Seconds  float64       `json:"seconds"`  // how long the log was read
	Requests int           `json:"requests"` // backend requests seen
	Rate     float64       `json:"rate"`     // backend requests per second
	Reasons  []ReasonShare `json:"reasons"`  // most first
}

// ReasonShare is the part of the backend requests one reason word had.
type ReasonShare struct {
	Reason  string  `json:"reason"` // a word of profiles.Reasons, or Unknown
	Count   int     `json:"count"`
	Rate    float64 `json:"rate"`              // requests per second
	Share   float64 `json:"share"`             // of the backend requests, 0–1
	Request string  `json:"request,omitempty"` // the most frequent method and URL pattern: "POST /xmlrpc.php"
	Cookie  string  `json:"cookie,omitempty"`  // the most frequent cookie named (session, set_cookie)
	Setting string  `json:"setting,omitempty"` // what would change it (profiles.Reasons)
}

// String says the share in a few words: "41 % session (cookie
// _my_tracker)", "29 % method POST /xmlrpc.php".
func (r ReasonShare) String() string {
	s := fmt.Sprintf("%.0f %% %s", math.Round(r.Share*100), r.Reason)
	if r.Cookie != "" && r.Cookie != Unknown {
		return s + " (cookie " + r.Cookie + ")"
	}
	if r.Request != "" && r.Request != Unknown {
		return s + " " + r.Request
	}
	return s
}

// Top returns the reason with the most requests; false when none was seen.
func (s Summary) Top() (ReasonShare, bool) {
	if len(s.Reasons) == 0 {
		return ReasonShare{}, false
	}
	return s.Reasons[0], true
}

// Summary returns the tally by reason, with rates over seconds.
func (t *Tally) Summary(target string, seconds float64) Summary {
	s := Summary{Target: target, Seconds: round(seconds), Requests: t.n, Rate: rate(t.n, seconds)}
	for _, r := range t.Rows(ByReason, 0, seconds) {
		rs := ReasonShare{Reason: r.Key, Count: r.Count, Rate: r.Rate, Share: r.Share, Request: r.URL}
		if r.Cookie != Unknown {
			rs.Cookie = r.Cookie
		}
		if rr, ok := profiles.LookupReason(r.Key); ok {
			rs.Setting = rr.Setting
		}
		s.Reasons = append(s.Reasons, rs)
	}
	return s
}

// Package top tells what reaches a Varnish target's backend, and why: it
// reads the backend requests and the reason word gearshift's profiles log
// for each (profiles.ReasonLog) from a varnishlog child process, and counts
// them by URL pattern, reason, cookie and client, in bounded memory.
package top

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"

	"github.com/gearshift/gearshift/profiles"
)

// Request is one backend request as the log tells it.
type Request struct {
	Method string // BereqMethod
	URL    string // BereqURL with its query values collapsed: /?s=*
	Reason string // the reason word; "" when the VCL logged none
	Detail string // what follows the word: "cookie=_my_tracker", "status=503"
	Cookie string // the cookie named in the detail (session, set_cookie); ""
	Client string // see clientOf

	reasons int  // reason records seen; the profiles write one
	guestNo bool // heavy's ask to the daemon, answered no: not a backend request
}

// Tags are the varnishlog records a Request is read from: a backend
// request's, and a client request's that the profiles refused for its
// client's budget (reason over_budget).
var Tags = []string{"BereqMethod", "BereqURL", "ReqMethod", "ReqURL", "VCL_Log"}

// OverBudget is the reason word of a client's request the profiles
// refused for its budget (profiles.client_budget): logged by the client's
// transaction, as no backend request was made.
const OverBudget = "over_budget"

// BackendFull is the reason word of a request the sites' limits turned
// away (the backend, or the site's share of it, was full).
const BackendFull = "backend_full"

// clientField starts over_budget's detail field naming the client.
const clientField = "client="

// xffTag selects the one request header read: X-Forwarded-For.
const xffTag = "BereqHeader:^X-Forwarded-For:"

// Limits of what is read from the log: longer lines are cut, longer URLs
// and cookie names shortened, so a hostile client cannot grow the counts.
const (
	maxLine   = 4096
	maxURL    = 160
	maxParams = 8
	maxName   = 64
)

// Unknown stands for a field a request does not have (no reason, no cookie).
const Unknown = "-"

// parseLog reads varnishlog's output (-g vxid, the default) and calls emit
// with every backend request, in the order its transaction ended. Lines
// past maxLine bytes are cut there.
func parseLog(r io.Reader, emit func(Request)) error {
	br := bufio.NewReaderSize(r, maxLine)
	var cur Request
	open := false
	flush := func() {
		if open && !cur.guestNo && (cur.URL != "" || cur.Method != "") {
			emit(cur)
		}
		cur, open = Request{}, false
	}
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			switch {
			case bytes.HasPrefix(line, []byte("*")):
				flush()
				open = true
			case len(bytes.TrimSpace(line)) == 0:
				flush()
			case open && bytes.HasPrefix(line, []byte("-")):
				tag, value := record(string(line[1:]))
				cur.add(tag, value)
			}
		}
		if err != nil {
			flush()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readLine returns the next line without its newline, cut at the reader's
// buffer size (the rest of a long line is skipped).
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		line = append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = br.ReadSlice('\n')
		}
	}
	return bytes.TrimRight(line, "\r\n"), err
}

// record splits "   TAG   value" into the tag and the value.
func record(s string) (tag, value string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

func (q *Request) add(tag, value string) {
	switch tag {
	case "BereqMethod", "ReqMethod":
		if q.Method == "" { // a retry (a restart) logs it again
			q.Method = shorten(value, maxName)
		}
	case "BereqURL", "ReqURL":
		if q.URL == "" {
			q.URL = collapseURL(value)
		}
	case "BereqHeader":
		if name, v, ok := strings.Cut(value, ":"); ok && strings.EqualFold(name, "X-Forwarded-For") {
			q.Client = clientOf(v)
		}
	case "VCL_Log":
		if value == profiles.GuestNoLog {
			q.guestNo = true
		}
		if rest, ok := strings.CutPrefix(value, profiles.ReasonLog); ok {
			if q.reasons++; q.reasons == 1 {
				q.Reason, q.Detail, q.Cookie = parseReason(rest)
				if q.Reason == OverBudget {
					// The client the budget counted (behind a proxy,
					// not the peer).
					for _, f := range strings.Fields(q.Detail) {
						if c, ok := strings.CutPrefix(f, clientField); ok && c != "" {
							q.Client = shorten(c, maxName)
						}
					}
				}
			}
		}
	}
}

// parseReason splits what follows profiles.ReasonLog into the word, the
// detail and the cookie the detail names.
func parseReason(s string) (word, detail, cookie string) {
	word, detail, _ = strings.Cut(strings.TrimSpace(s), " ")
	detail = shorten(strings.TrimSpace(detail), maxURL)
	for _, f := range strings.Fields(detail) {
		if name, ok := strings.CutPrefix(f, profiles.ReasonCookie); ok && name != "" {
			cookie = shorten(name, maxName)
			break
		}
	}
	return shorten(word, maxName), detail, cookie
}

// collapseURL keeps a URL's path and its query's parameter names, each
// value replaced by "*": "/?s=foo&paged=2" is "/?s=*&paged=*", so a crawl
// of searches counts as one URL.
func collapseURL(u string) string {
	path, query, hasQuery := strings.Cut(u, "?")
	path, _, _ = strings.Cut(path, "#")
	if !hasQuery {
		return shorten(path, maxURL)
	}
	query, _, _ = strings.Cut(query, "#")
	var b strings.Builder
	b.WriteString(path)
	sep := "?"
	for i, p := range strings.Split(query, "&") {
		if i == maxParams {
			b.WriteString("&…")
			break
		}
		name, _, hasValue := strings.Cut(p, "=")
		b.WriteString(sep + name)
		if hasValue {
			b.WriteString("=*")
		}
		sep = "&"
	}
	return shorten(b.String(), maxURL)
}

// clientOf picks the client from the X-Forwarded-For a backend request
// carries (Varnish appends the address of its peer): the right-most
// address that is not loopback. A TLS terminator on the same host appends
// its peer, the real client; a client's own X-Forwarded-For, to the left,
// is never taken while a later address is there, so it cannot forge its
// place. All loopback (a local test): the last one.
func clientOf(xff string) string {
	parts := strings.Split(xff, ",")
	last := ""
	for i := len(parts) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(parts[i]))
		if err != nil {
			continue
		}
		if !a.Unmap().IsLoopback() {
			return a.String()
		}
		if last == "" {
			last = a.String()
		}
	}
	if last == "" {
		return Unknown
	}
	return last
}

// shorten cuts s to at most n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-len("…")], "") + "…"
}

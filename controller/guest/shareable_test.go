package guest

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// The check is at least as strict as what heavy never shares, and
// compares what a visitor keeps of the answer, headers too.
func TestJudgedAsStrictlyAsNeverShare(t *testing.T) {
	var fetches atomic.Int64
	for _, tc := range []struct {
		name    string
		headers func(h http.Header)
		why     string // "": shared
		private bool   // counted as a private page
	}{
		{"Cache-Control: no-store, as PHP's session start sends", func(http.Header) {}, "", false},
		{"Surrogate-Control: no-store", func(h http.Header) { h.Set("Surrogate-Control", "max-age=60, No-Store") }, "Surrogate-Control: no-store", false},
		{"Surrogate-Control: no-store for one surrogate", func(h http.Header) { h.Set("Surrogate-Control", "no-store;edge, max-age=60") }, "Surrogate-Control: no-store", false},
		{"Surrogate-Control without no-store", func(h http.Header) { h.Set("Surrogate-Control", "max-age=60") }, "", false},
		{"Vary: Accept-Encoding", func(h http.Header) { h.Set("Vary", "Accept-Encoding") }, "", false},
		{"Vary: Accept-Language", func(h http.Header) { h.Set("Vary", "Accept-Language") }, "Vary: other than Accept-Encoding", false},
		{"Vary: User-Agent among others", func(h http.Header) { h.Set("Vary", "accept-encoding, User-Agent") }, "Vary: other than Accept-Encoding", false},
		{"Vary on two lines", func(h http.Header) { h.Add("Vary", "Accept-Encoding"); h.Add("Vary", "Cookie") }, "Vary: other than Accept-Encoding", false},
		{"Vary: *", func(h http.Header) { h.Set("Vary", "*") }, "Vary: *", false},
		{"an ETag per visitor", func(h http.Header) { h.Set("ETag", `"`+token()+`"`) }, "headers differ between two new visitors: Etag", true},
		{"a Link per visitor", func(h http.Header) { h.Set("Link", "</s.css?v="+token()+">; rel=preload") }, "headers differ between two new visitors: Link", true},
		{"a header for the first visitor alone", func(h http.Header) {
			if fetches.Add(1)%2 == 1 {
				h.Set("X-Ab-Group", "b")
			}
		}, "headers differ between two new visitors: X-Ab-Group", true},
		{"the same ETag and Last-Modified", func(h http.Header) {
			h.Set("ETag", `"v1"`)
			h.Set("Last-Modified", "Tue, 01 Dec 2026 10:00:00 GMT")
		}, "", false},
		{"an upstream cache's Age and X-Varnish", func(h http.Header) {
			h.Set("Age", token())
			h.Set("X-Varnish", token())
		}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fetches.Store(0)
			s := newSite(t)
			s.setHeaders("/article", tc.headers)
			g, _ := newServer(t, s)
			resp := ask(t, g, "/article")
			if tc.why == "" {
				if resp.Header.Get(Header) != Shared {
					t.Errorf("%s %q (%s), want shared", Header, resp.Header.Get(Header), resp.Header.Get("X-Gs-Guest-Why"))
				}
				return
			}
			if resp.StatusCode == http.StatusOK || resp.Header.Get(Header) != No {
				t.Errorf("status %d, %s %q, want a no", resp.StatusCode, Header, resp.Header.Get(Header))
			}
			if got := resp.Header.Get("X-Gs-Guest-Why"); got != tc.why {
				t.Errorf("no because %q, want %q", got, tc.why)
			}
			if st := g.Stats(); (st.Private == 1) != tc.private {
				t.Errorf("%d private pages, want the page counted private: %v", st.Private, tc.private)
			}
		})
	}
}

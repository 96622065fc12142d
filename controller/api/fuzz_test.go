package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// FuzzForceBody posts arbitrary bodies to /v1/force: the handler must not
// panic, must answer 200 or 400 with JSON (404 for a site the config does
// not have), and must force only what a valid body asked for, with a
// deadline within the longest force allowed.
func FuzzForceBody(f *testing.F) {
	for _, s := range []string{
		`{"state":"heavy","for":"30m"}`,
		`{"state":"light"}`,
		`{"state":"moderate","for":"0"}`,
		`{"state":"heavy","for":"-5m"}`,
		`{"state":"heavy","for":"9999999h"}`,
		`{"state":"HEAVY","for":"1h30m"}`,
		`{"state":"heavy"} {"state":"light"}`,
		`{"state":"heavy","x":1}`,
		`{"state":"heavy","site":"shop"}`,
		`{"state":"heavy","site":"nosuch"}`,
		`{"state":"heavy","site":7}`,
		`{"state":1}`,
		`[]`,
		`null`,
		``,
		"{\"state\":\"heavy\u0000\"}",
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		api := &fakeAPI{}
		h := NewHandler(api, func() time.Time { return now })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/force", bytes.NewReader(body)))
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%q: Content-Type %q", body, ct)
		}
		switch rec.Code {
		case http.StatusOK:
			var s Status
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || api.forced == nil {
				t.Fatalf("%q: 200 with %q (%v), forced %v", body, rec.Body, err, api.forced)
			}
			if _, err := state.Parse(s.State); err != nil {
				t.Fatalf("%q: forced an unknown state %q", body, s.State)
			}
			if !api.until.IsZero() && !api.until.After(now) {
				t.Fatalf("%q: forced until %s, not after now", body, api.until)
			}
		case http.StatusBadRequest, http.StatusNotFound:
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || strings.Contains(e.Error, "\n") {
				t.Fatalf("%q: %d with %q (%v): want one line in \"error\"", body, rec.Code, rec.Body, err)
			}
			if rec.Code == http.StatusNotFound && !strings.HasPrefix(e.Error, "no site ") {
				t.Fatalf("%q: 404 %q, want an unknown site named", body, e.Error)
			}
			if api.forced != nil {
				t.Fatalf("%q: refused, yet forced %v", body, *api.forced)
			}
		default:
			t.Fatalf("%q: answered %d %q", body, rec.Code, rec.Body)
		}
	})
}

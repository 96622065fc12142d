package api

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// GET /v1/status?site=NAME answers that site's object alone, and 404 for
// a site the config does not have.
func TestHandlerSiteStatus(t *testing.T) {
	f := &fakeAPI{}
	h := NewHandler(f, nil)
	for _, tc := range []struct {
		path string
		code int
		want string // the site's name, or what the error says
	}{
		{"/v1/status?site=shop", 200, "shop"},
		{"/v1/status?site=default", 200, "default"},
		{"/v1/status?site=nosuch", 404, `no site "nosuch"`},
		{"/v1/status?site=%0Ax", 404, `no site "\nx"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
			if rec.Code != tc.code || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s %s, want %d", rec.Code, rec.Header().Get("Content-Type"), rec.Body, tc.code)
			}
			if tc.code != 200 {
				var e errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.want) || strings.Contains(e.Error, "\n") {
					t.Errorf("error body %s, want %q", rec.Body, tc.want)
				}
				return
			}
			var site map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &site); err != nil || site["name"] != tc.want {
				t.Fatalf("body %s (%v), want the site %s", rec.Body, err, tc.want)
			}
			if _, ok := site["version"]; ok {
				t.Errorf("body %s holds the whole status, want the site's object alone", rec.Body)
			}
			for _, key := range []string{"hosts", "gear", "mode", "forced_until", "since", "reason", "backend_rps", "backend_share", "max_connections"} {
				if _, ok := site[key]; !ok {
					t.Errorf("site object %s has no %q", rec.Body, key)
				}
			}
		})
	}
}

// A daemon before sites ignores ?site= and answers its whole status: the
// client says so rather than show an empty site.
func TestClientSiteStatusOfADaemonWithoutSites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveHTTP(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, Status{Version: "0.4.0", State: "light", Mode: "auto"})
		}), controlTimeouts)
	}()
	defer func() { cancel(); <-done }()
	_, err = NewClient(path).SiteStatus(context.Background(), "default")
	if err == nil || !strings.Contains(err.Error(), "knows no sites") {
		t.Fatalf("SiteStatus from a daemon without sites = %v", err)
	}
}

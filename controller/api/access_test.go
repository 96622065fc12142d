package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAccess(t *testing.T) {
	admins, err := NewAccess("nogroup")
	if err != nil {
		t.Fatal(err)
	}
	rootOnly, _ := NewAccess("")
	if _, err := NewAccess("no-such-group-gearshift"); err == nil || !strings.Contains(err.Error(), "control.admin_group") {
		t.Errorf("NewAccess of a missing group = %v, want an error naming control.admin_group", err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, tc := range []struct {
		name   string
		access Access
		method string
		peer   *Peer
		code   int
	}{
		{"anyone reads", rootOnly, "GET", &Peer{UID: 1000, GID: 1000}, 200},
		{"unknown peer reads", rootOnly, "GET", nil, 200},
		{"root changes", rootOnly, "POST", &Peer{UID: 0, GID: 0}, 200},
		{"a user may not", rootOnly, "POST", &Peer{UID: 65534, GID: 65534}, 403},
		{"an admin may", admins, "POST", &Peer{UID: 65534, GID: 65534}, 200},
		{"a user outside the admin group may not", admins, "POST", &Peer{UID: 1000, GID: 1000}, 403},
		{"an unknown peer may not", admins, "POST", nil, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/v1/force", nil)
			if tc.peer != nil {
				req = req.WithContext(context.WithValue(req.Context(), peerKey{}, *tc.peer))
			}
			rec := httptest.NewRecorder()
			tc.access.guard(ok).ServeHTTP(rec, req)
			if rec.Code != tc.code {
				t.Errorf("code %d, want %d; body %s", rec.Code, tc.code, rec.Body)
			}
			if tc.code == 403 && !strings.Contains(rec.Body.String(), "needs root") {
				t.Errorf("403 body %s does not say what is needed", rec.Body)
			}
		})
	}
}

package system

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// TestGuestPagesThroughTheDaemon: the daemon with the default config
// (guest_pages: auto) in front of a site that gives every visitor a
// session: forced to heavy, it bans the guest copies of an earlier heavy,
// shares the page that is the same for every new visitor (a HIT without
// Set-Cookie for a visitor with no cookie), never the one carrying a
// token, and its status counts both.
func TestGuestPagesThroughTheDaemon(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := make([]byte, 16)
		rand.Read(sid)
		http.SetCookie(w, &http.Cookie{Name: "PHPSESSID", Value: hex.EncodeToString(sid), Path: "/"})
		w.Header().Set("Cache-Control", "no-store, no-cache, must-revalidate")
		switch r.URL.Path {
		case "/article":
			io.WriteString(w, "<p>The same article for every visitor.</p>\n")
		default:
			token := make([]byte, 16)
			rand.Read(token)
			fmt.Fprintf(w, "<form><input name=csrf value=%x></form>\n", token)
		}
	}))
	t.Cleanup(srv.Close)
	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Backend = profiles.BackendAt("127.0.0.1", srv.Listener.Addr().(*net.TCPAddr).Port)
	})
	if _, errOut, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}
	d.eventually("the guest copies of an earlier heavy banned", 10*time.Second, func() error {
		out, err := v.Adm("ban.list")
		if err != nil || !strings.Contains(out, "obj.http.X-Gs-Guest == 1") {
			return fmt.Errorf("ban.list: %v\n%s", err, out)
		}
		return nil
	})

	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(v.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	var last *http.Response
	for range 3 {
		last, _ = get("/article")
	}
	if last.Header.Get("X-Cache") != "HIT" || len(last.Header.Values("Set-Cookie")) != 0 {
		t.Errorf("third cookie-less view of the article: X-Cache %s, Set-Cookie %q; want a HIT on the guest copy without one",
			last.Header.Get("X-Cache"), last.Header.Values("Set-Cookie"))
	}
	tokens := map[string]bool{}
	for i := range 3 {
		resp, body := get("/form?token=visitors-own")
		tokens[body] = true
		if resp.Header.Get("X-Cache") == "HIT" || len(resp.Header.Values("Set-Cookie")) == 0 {
			t.Errorf("view %d of the form: X-Cache %s, Set-Cookie %q; want the visitor's own page and session",
				i+1, resp.Header.Get("X-Cache"), resp.Header.Values("Set-Cookie"))
		}
	}
	if len(tokens) != 3 {
		t.Errorf("3 views of the form gave %d distinct tokens, want 3", len(tokens))
	}
	d.eventually("status counts the guest pages", 10*time.Second, func() error {
		s, err := d.status()
		if err != nil {
			return err
		}
		// A private page is named by its path: its query may hold what
		// its visitor typed.
		if s.GuestPages != 1 || s.GuestPrivate != 1 || len(s.GuestPrivateURLs) != 1 || !strings.HasSuffix(s.GuestPrivateURLs[0], "/form") {
			return fmt.Errorf("guest_pages %d, guest_private %d %q; want 1, 1 [.../form] without the query", s.GuestPages, s.GuestPrivate, s.GuestPrivateURLs)
		}
		return nil
	})
}

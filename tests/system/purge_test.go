package system

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// TestPurgeTagDropsTaggedPages: `gearshift purge --tag` drops from a real
// Varnish every page the backend tagged with the tag, by its xkey header
// or its Surrogate-Key, and no other: a HIT before, a MISS (a fetch from
// the backend) after.
func TestPurgeTagDropsTaggedPages(t *testing.T) {
	tags := map[string][2]string{ // path: header, tags
		"/xkey":      {"xkey", "product-42 cat-7"},
		"/surrogate": {"Surrogate-Key", "home product-42"},
		"/untagged":  {"Surrogate-Key", "product-43"},
	}
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if tag, ok := tags[r.URL.Path]; ok {
			w.Header().Set(tag[0], tag[1])
		}
		w.Header().Set("Cache-Control", "max-age=600")
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	v := varnishtest.Start(t, varnishtest.Config{})
	d := startDaemonOn(t, v, func(cfg *config.Config) {
		cfg.Backend = profiles.BackendAt("127.0.0.1", srv.Listener.Addr().(*net.TCPAddr).Port)
	})
	if _, errOut, code := d.gs("force", "heavy"); code != exitOK {
		t.Fatalf("force heavy: exit %d: %s", code, errOut)
	}

	client := &http.Client{Timeout: 30 * time.Second}
	xcache := func(path string) string {
		t.Helper()
		resp, err := client.Get(v.URL(path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return resp.Header.Get("X-Cache")
	}
	for path := range tags {
		xcache(path)
		if got := xcache(path); got != "HIT" {
			t.Fatalf("second view of %s: X-Cache %q, want HIT", path, got)
		}
	}

	out, errOut, code := d.gs("purge", "--tag", "product-42")
	if code != exitOK || !strings.Contains(out, ": banned") {
		t.Fatalf("purge --tag product-42: exit %d\n%s%s", code, out, errOut)
	}
	before := fetches.Load()
	for path, want := range map[string]string{"/xkey": "MISS", "/surrogate": "MISS", "/untagged": "HIT"} {
		if got := xcache(path); got != want {
			t.Errorf("%s (%s: %s) after purge --tag product-42: X-Cache %q, want %s", path, tags[path][0], tags[path][1], got, want)
		}
	}
	if n := fetches.Load() - before; n != 2 {
		t.Errorf("after the purge the backend was asked %d times, want 2 (the two tagged pages)", n)
	}
}

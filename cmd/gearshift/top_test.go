package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/top"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

// TestTopJSON runs `gearshift top --json` on a real varnishd in heavy while
// xmlrpc.php is flooded with POSTs: the flood is the top URL and its
// reason the top reason.
func TestTopJSON(t *testing.T) {
	testenv.Need(t, "varnishlog", "varnish")
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintln(w, "ok")
	}))
	defer origin.Close()
	site := profiles.Site{Options: profiles.DefaultOptions(), Backend: profiles.BackendAt("127.0.0.1", origin.Listener.Addr().(*net.TCPAddr).Port)}
	heavy, err := profiles.Render(site, state.Heavy)
	if err != nil {
		t.Fatal(err)
	}
	v := varnishtest.Start(t, varnishtest.Config{VCL: heavy})
	path, _ := configtest.ForVarnish(t, v, func(c *config.Config) {
		c.Varnish.Targets[0].Name = v.WorkDir
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if resp, err := http.Post(v.URL("/xmlrpc.php"), "text/xml", strings.NewReader("<methodCall/>")); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	code, stdout, stderr := runMain(t, "--config", path, "top", "--for", "2s", "--json", "--by", "url")
	close(stop)
	wg.Wait()
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var view top.View
	if err := json.Unmarshal([]byte(stdout), &view); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if view.Target != v.WorkDir || view.By != "url" || len(view.Rows) == 0 || view.Rows[0].Key != "POST /xmlrpc.php" || view.Rows[0].Reason != "method" {
		t.Errorf("view = %s, want rows led by POST /xmlrpc.php (method) from %s", stdout, v.WorkDir)
	}
	if r, ok := view.Top(); !ok || r.String() != "100 % method POST /xmlrpc.php" {
		t.Errorf("top reason = %q, want 100 %% method POST /xmlrpc.php", r)
	}
}

func TestTopUsage(t *testing.T) {
	v := varnishtest.Start(t, varnishtest.Config{})
	path, _ := configtest.ForVarnish(t, v, nil)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no named target", nil, "no Varnish target has a name"},
		{"unknown target", []string{"--target", "www"}, `no Varnish target is named "www"`},
		{"unknown grouping", []string{"--by", "host"}, `unknown grouping "host"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runMain(t, append([]string{"--config", path, "top", "--json"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

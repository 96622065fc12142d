package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/varnishadm/varnishtest"
	"github.com/gearshift/gearshift/profiles"
)

func TestRunServesMetrics(t *testing.T) {
	var addr string
	d := startDaemon(t, func(cfg *profiles.Config) {
		addr = varnishtest.FreeAddr(t)
		cfg.MetricsListen = addr
	})
	scrape := func() (string, error) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	body, err := scrape()
	if err != nil {
		t.Fatalf("scrape metrics_listen %s: %v", addr, err)
	}
	for _, want := range []string{"gearshift_state 0\n", "gearshift_forced 0\n", "gearshift_target_up{admin=\"" + d.v.AdminAddr + "\"} 1\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if _, stderr, code := d.gs("force", "heavy"); code != 0 {
		t.Fatalf("force heavy: exit %d: %s", code, stderr)
	}
	d.eventually("metrics follow force", 10*time.Second, func() error {
		body, err := scrape()
		if err != nil {
			return err
		}
		if !strings.Contains(body, "gearshift_state 2\n") || !strings.Contains(body, "gearshift_forced 1\n") {
			return fmt.Errorf("not heavy and forced yet:\n%s", body)
		}
		return nil
	})
}

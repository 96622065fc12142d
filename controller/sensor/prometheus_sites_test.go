package sensor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/promtest"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// A query whose series carry a site label gives each site its own number
// and the server none; one whose series do not is the server's, as
// before; a site given two series is refused. Against Debian's
// prometheus scraping a small exporter.
func TestPrometheusBySite(t *testing.T) {
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "test_site_gear{site=\"shop\",node=\"a\"} 2\ntest_site_gear{site=\"shop\",node=\"b\"} 0\n"+
			"test_site_gear{site=\"wiki\",node=\"a\"} 0\ntest_site_gear{site=\"wiki\",node=\"b\"} 1\n")
	}))
	defer exporter.Close()
	prom := promtest.Start(t, strings.TrimPrefix(exporter.URL, "http://"))
	testenv.Eventually(t, "prometheus to scrape the exporter", 30*time.Second, func() bool {
		v, err := prom.Query("test_site_gear")
		return err == nil && len(v) == 4
	})
	p := prometheusReader(t, prom.URL, map[string]string{
		"fleet_site_gear": "max by (site) (test_site_gear)",
		"fleet_gear":      "max(test_site_gear)",
		"dup":             "test_site_gear",
	})
	apply, err := p.Read(context.Background())
	s := Sample{Values: map[string]float64{}}
	if apply != nil {
		apply(&s)
	}
	if s.Sites["shop"]["fleet_site_gear"] != 2 || s.Sites["wiki"]["fleet_site_gear"] != 1 || len(s.Sites) != 2 {
		t.Errorf("sites %v, want shop 2 and wiki 1", s.Sites)
	}
	if _, ok := s.Values["fleet_site_gear"]; ok || s.Values["fleet_gear"] != 2 {
		t.Errorf("the server's values %v, want fleet_gear 2 and no fleet_site_gear", s.Values)
	}
	if err == nil || !strings.Contains(err.Error(), "prometheus dup: ") || !strings.Contains(err.Error(), "more than one series, want one number per site") {
		t.Errorf("Read error %v, want dup refused: two series for one site", err)
	}
}

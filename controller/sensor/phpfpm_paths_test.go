package sensor

import (
	"slices"
	"testing"
)

// TestPHPFPMStatusPaths: the paths the profiles never answer through
// Varnish are those of the status pages the source reads.
func TestPHPFPMStatusPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  PHPFPMConfig
		want []string
	}{
		{"off", PHPFPMConfig{}, nil},
		{"socket, default path", PHPFPMConfig{Socket: "/run/php/fpm-status.sock"}, []string{"/status"}},
		{"socket, own path", PHPFPMConfig{Socket: "127.0.0.1:9001", Path: "/fpm-status"}, []string{"/fpm-status"}},
		{"url", PHPFPMConfig{URL: "http://127.0.0.1:8080/fpm-status?full"}, []string{"/fpm-status"}},
		{"pools", PHPFPMConfig{Socket: "/a.sock", Path: "/st", Pools: []PHPFPMPool{
			{Name: "b", Socket: "/b.sock"}, {Name: "c", URL: "http://127.0.0.1/c-status"}, {Name: "d", Socket: "/d.sock", Path: "/d"}}},
			[]string{"/st", "/c-status", "/d"}},
	} {
		if got := tc.cfg.StatusPaths(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: StatusPaths() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

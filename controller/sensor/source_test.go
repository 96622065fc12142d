package sensor

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/state"
)

// TestSourcesCoverConfig keeps the rows and the config in step: every
// setting of the sensor block turns on exactly one row, every row but the
// machine's has a key and an On, and what a row overrides comes before it.
func TestSourcesCoverConfig(t *testing.T) {
	keys := map[string]int{}
	for _, src := range Sources {
		if src.Key != "" {
			keys[src.Key]++
		}
	}
	ct := reflect.TypeOf(Config{})
	for i := range ct.NumField() {
		tag, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ",")
		key := "sensor." + tag
		n := 0
		for k, c := range keys {
			if k == key || strings.HasPrefix(k, key+".") {
				n += c
			}
		}
		if n != 1 {
			t.Errorf("config key %s turns on %d rows of Sources, want 1 (a row is missing from the list?)", key, n)
		}
	}
	declared := map[string]bool{}
	for _, s := range state.Builtin {
		declared[s.Name] = true
	}
	for i, src := range Sources {
		if src.Name == "" || src.On == nil {
			t.Errorf("row %d (%q) needs a name and an On", i, src.Name)
		}
		if src.Key == "" && i > 0 {
			t.Errorf("row %s has no config key: only the machine's vitals are always on", src.Name)
		}
		if src.Open == nil && src.Key != "" {
			t.Errorf("row %s can be turned on but has no reader", src.Name)
		}
		for _, name := range src.Overrides {
			if !declared[name] {
				t.Errorf("row %s overrides %s, which no earlier row declares", src.Name, name)
			}
		}
		for _, s := range src.Signals {
			declared[s.Name] = true
		}
	}
}

func TestSignalsFollowTheRows(t *testing.T) {
	set, err := Signals(HostConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"load_per_cpu", "mem_available_pct", "psi_cpu", "psi_mem",
		"client_rps", "backend_rps", "backend_fail_rps", "dropped_rps", "queue_len", "backend_busy", "hit_ratio", "backend_share",
		"apache_busy_ratio", "backend_ttfb_ms", "injected", "backend_healthy",
		"phpfpm_queue", "phpfpm_busy_ratio", "phpfpm_max_children_reached",
	}
	if got := set.Names(); !slices.Equal(got, want) {
		t.Errorf("signal set %v, want %v", got, want)
	}
	if s, _ := set.Lookup("backend_ttfb_ms"); s.Source != "sensor.probe.url" {
		t.Errorf("backend_ttfb_ms comes from %q, want its row's key", s.Source)
	}
}

func TestUnsourced(t *testing.T) {
	off := HostConfig{}
	on := HostConfig{
		Varnish:      []string{"www"},
		Admins:       []AdminTarget{{Addr: "127.0.0.1:6082", SecretFile: "/etc/varnish/secret"}},
		BackendProbe: true,
		Sensor: Config{
			Cgroup: "system.slice/apache2.service", ApacheStatus: "http://127.0.0.1/server-status",
			Probe: ProbeConfig{URL: "http://127.0.0.1/"}, InjectFile: "/run/x",
			PHPFPM: PHPFPMConfig{Socket: "/run/php/php8.2-fpm.sock"},
		},
	}
	set, _ := Signals(off)
	for _, s := range set.All() {
		src, unsourced := Unsourced(off, s.Name)
		if s.Source == "" {
			if unsourced {
				t.Errorf("%s needs no source, but is reported unsourced", s.Name)
			}
			continue
		}
		if !unsourced || src.Key != s.Source {
			t.Errorf("%s without %s: unsourced %v (row %v)", s.Name, s.Source, unsourced, src)
		}
		if _, unsourced := Unsourced(on, s.Name); unsourced {
			t.Errorf("%s with every source on is unsourced", s.Name)
		}
	}
}

func TestCheckSources(t *testing.T) {
	var got []string
	Check(HostConfig{Sensor: Config{
		Cgroup: "../etc", ApacheStatus: "ftp://x", InjectFile: "relative",
		Probe: ProbeConfig{URL: "nope", Timeout: 0}, PHPFPM: PHPFPMConfig{Socket: "php.sock"},
	}}, func(key, format string, args ...any) { got = append(got, key) })
	want := []string{"sensor.cgroup", "sensor.apache_status", "sensor.probe.url", "sensor.probe.timeout", "sensor.inject_file",
		"sensor.phpfpm.timeout", "sensor.phpfpm.socket"}
	if !slices.Equal(got, want) {
		t.Errorf("problems with %v, want %v", got, want)
	}
}

package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseSettings feeds arbitrary documents to the config loader (YAML,
// then every check that needs no file): it must never panic, and a config
// it refuses is an *Error whose every problem is one line.
func FuzzParseSettings(f *testing.F) {
	for _, s := range []string{
		"",
		"poll_interval: 1s\n",
		"varnish: { mode: label, targets: [ { admin: 127.0.0.1:6082, secret_file: /etc/varnish/secret, name: www } ] }\n",
		"states: { moderate: { enter: { load_per_cpu: 0.8 }, stay: { load_per_cpu: 0.5 } } }\n",
		"hysteresis: { up_confirm: 3, down_window: 2m, min_dwell: 30s }\n",
		"profiles: { heavy: { ttl: 10m, grace: 1h, cookie_allow: ['wp-*', '[0-9a-f'] } }\n",
		"backend: { host: '::1', port: 80 }\ncontrol: { socket: /run/gearshift/gearshift.sock, group: adm }\n",
		"poll_intervall: 1s\n",
		"a: &a [*a, *a]\n",
		"- 1\n- 2\n",
		"on_exit: [light]\n",
		"\t\x00: x",
		"cpus: 99999999999999999999\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		cfg, err := ParseSettings(doc)
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config without an error")
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("%q: error %T %v, want an *Error with problems", doc, err, err)
		}
		for _, p := range ce.Problems {
			if s := p.String(); strings.TrimSpace(s) == "" || strings.Contains(s, "\n") {
				t.Fatalf("%q: problem %q is not one line", doc, s)
			}
		}
	})
}

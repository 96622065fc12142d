package config

import (
	"reflect"
	"testing"
)

// A source's default conditions join the rules the file does not give,
// and only those; where they would break the order of the rules, they
// are left out.
func TestSourceRules(t *testing.T) {
	// A Varnish on another machine: its counters (backend_busy's) are
	// not read, and PHP-FPM's conditions are the only source's.
	const remote = "varnish: { targets: [ { admin: 192.0.2.10:6082, secret_file: /etc/varnish/secret } ] }\n"
	const fpm = remote + "sensor: { phpfpm: { socket: /run/php/php8.2-fpm.sock } }\n"
	tests := []struct {
		name string
		doc  string
		want States
	}{
		{"php-fpm off: the defaults", remote, Default().States},
		{"the default target, on loopback: backend_busy joins every rule", "", States{
			Moderate: Band{
				Enter: Rule{"load_per_cpu": 0.70, "mem_available_pct": 20, "backend_busy": 0.5},
				Stay:  Rule{"load_per_cpu": 0.50, "mem_available_pct": 25, "backend_busy": 0.1},
			},
			Heavy: Band{
				Enter: Rule{"load_per_cpu": 1.50, "mem_available_pct": 10, "backend_busy": 2},
				Stay:  Rule{"load_per_cpu": 1.00, "mem_available_pct": 15, "backend_busy": 0.5},
			},
		}},
		{"php-fpm on: its conditions join every rule", fpm, States{
			Moderate: Band{
				Enter: Rule{"load_per_cpu": 0.70, "mem_available_pct": 20, "phpfpm_queue": 1},
				Stay:  Rule{"load_per_cpu": 0.50, "mem_available_pct": 25, "phpfpm_queue": 1},
			},
			Heavy: Band{
				Enter: Rule{"load_per_cpu": 1.50, "mem_available_pct": 10, "phpfpm_busy_ratio": 0.9},
				Stay:  Rule{"load_per_cpu": 1.00, "mem_available_pct": 15, "phpfpm_busy_ratio": 0.7},
			},
		}},
		{"a rule given replaces them too", fpm + "states: { heavy: { enter: { load_per_cpu: 2 } } }\n", States{
			Moderate: Band{
				Enter: Rule{"load_per_cpu": 0.70, "mem_available_pct": 20, "phpfpm_queue": 1},
				Stay:  Rule{"load_per_cpu": 0.50, "mem_available_pct": 25, "phpfpm_queue": 1},
			},
			// No stay on the busy ratio when heavy is not entered on it.
			Heavy: Band{Enter: Rule{"load_per_cpu": 2}, Stay: Rule{"load_per_cpu": 1.00, "mem_available_pct": 15}},
		}},
		{"out of order: left out", fpm + "states: { heavy: { enter: { load_per_cpu: 2, phpfpm_queue: 1 } }, moderate: { stay: { phpfpm_busy_ratio: 0.5 } } }\n", States{
			Moderate: Band{
				Enter: Rule{"load_per_cpu": 0.70, "mem_available_pct": 20},
				Stay:  Rule{"phpfpm_busy_ratio": 0.5},
			},
			Heavy: Band{Enter: Rule{"load_per_cpu": 2, "phpfpm_queue": 1}, Stay: Rule{"load_per_cpu": 1.00, "mem_available_pct": 15}},
		}},
		{"a stay no looser than the enter takes the enter's", fpm + "states: { heavy: { enter: { phpfpm_busy_ratio: 0.6 } } }\n", States{
			Moderate: Band{
				Enter: Rule{"load_per_cpu": 0.70, "mem_available_pct": 20, "phpfpm_queue": 1},
				Stay:  Rule{"load_per_cpu": 0.50, "mem_available_pct": 25, "phpfpm_queue": 1},
			},
			Heavy: Band{Enter: Rule{"phpfpm_busy_ratio": 0.6}, Stay: Rule{"load_per_cpu": 1.00, "mem_available_pct": 15, "phpfpm_busy_ratio": 0.6}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseSettings([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.States, tc.want) {
				t.Errorf("states = %+v\nwant     %+v", c.States, tc.want)
			}
		})
	}
}

package profilecheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
	"github.com/gearshift/gearshift/profiles"
)

// Check compiles every gear in a real varnishd and leaves nothing behind;
// a gear that does not compile comes back with the compiler's message.
func TestCheck(t *testing.T) {
	v := varnishtest.Start(t, varnishtest.Config{})
	bad := filepath.Join(t.TempDir(), "bad.vcl")
	if err := os.WriteFile(bad, []byte("vcl 4.1;\nbackend default none;\nsub vcl_recv { set req.http.X = no_such_symbol; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(edit func(*config.Config)) (*config.Config, profiles.Set) {
		t.Helper()
		cfg := config.Default()
		cfg.History.Dir = "" // tests record nothing unless they say so
		cfg.Varnish.Targets = []config.Target{{Admin: v.AdminAddr, SecretFile: v.SecretFile}}
		cfg.Varnish.Timeout = timefmt.Duration(30 * time.Second)
		if edit != nil {
			edit(cfg)
		}
		set, err := profiles.Build(cfg.Site())
		if err != nil {
			t.Fatal(err)
		}
		return cfg, set
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, tc := range []struct {
		name   string
		edit   func(*config.Config)
		failed map[string]bool // by gear
	}{
		{"all compile", nil, nil},
		{"moderate does not", func(c *config.Config) { c.Profiles.Moderate.VCLFile = bad }, map[string]bool{"moderate": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, set := build(tc.edit)
			var got []Result
			if err := Run(ctx, cfg, set, func(r Result) { got = append(got, r) }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(set) {
				t.Fatalf("%d results, want one per gear: %+v", len(got), got)
			}
			for i, r := range got {
				if r.Target != v.AdminAddr || r.Profile.Name != set[i].Name {
					t.Errorf("result %d = %s on %s, want %s on %s", i, r.Profile.Name, r.Target, set[i].Name, v.AdminAddr)
				}
				if !tc.failed[r.Profile.Gear.String()] {
					if r.Err != nil {
						t.Errorf("%s: %v", r.Profile.Gear, r.Err)
					}
					continue
				}
				var ce *varnishadm.CLIError
				if !errors.As(r.Err, &ce) || !strings.Contains(ce.Text, "no_such_symbol") {
					t.Errorf("%s: error %v, want the compiler's message", r.Profile.Gear, r.Err)
				}
			}
			out, err := v.Adm("vcl.list")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "gearshift-") {
				t.Errorf("the check left VCLs behind:\n%s", out)
			}
		})
	}

	t.Run("refused before it starts", func(t *testing.T) {
		cfg, set := build(func(c *config.Config) { c.Varnish.Targets = nil })
		if err := Run(ctx, cfg, set, func(Result) { t.Error("checked without a target") }); err == nil || !strings.Contains(err.Error(), "varnish.targets") {
			t.Errorf("no targets: %v, want an error naming varnish.targets", err)
		}
		cfg, set = build(func(c *config.Config) { c.Varnish.Targets[0].SecretFile = filepath.Join(t.TempDir(), "absent") })
		if err := Run(ctx, cfg, set, func(Result) { t.Error("checked without the secret") }); err == nil || !strings.Contains(err.Error(), v.AdminAddr) {
			t.Errorf("unreadable secret: %v, want an error naming the target", err)
		}
	})
}

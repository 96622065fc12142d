package config

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestLoadNamesTheFile(t *testing.T) {
	r := fixture(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "gearshift.yaml")
	if err := os.WriteFile(path, []byte(r.Replace(base+"cpus: -1\non_exit: x\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := "config " + path + " has 2 problems:\ncpus: must be 0 (detect) or a number of CPUs, got -1 (line 2)\non_exit: must be one of keep, light, moderate, heavy, got \"x\" (line 3)"
	if err == nil || err.Error() != want {
		t.Errorf("Load error:\n%v\nwant:\n%s", err, want)
	}
	if _, err := Load(filepath.Join(dir, "absent.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want ErrNotExist", err)
	}
}

func TestUnreadableSecret(t *testing.T) {
	if os.Geteuid() == 0 {
		// root reads any file: run this test again as nobody.
		rerunAsNobody(t)
		return
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := Parse([]byte("varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: " + secret + " } ] }"))
	if err == nil || !strings.Contains(err.Error(), secret+" is not readable by this user") {
		t.Errorf("error = %v", err)
	}
}

// The effective config printed by `config show` reads back as the same config.
func TestYAMLRoundTrip(t *testing.T) {
	r := fixture(t)
	c, err := Parse([]byte(r.Replace(base + "states: { heavy: { enter: { load_per_cpu: 2 } } }\nhysteresis: { down_window: 90m }")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"down_window: 1h30m\n", "heavy_min_ttl: 2m\n", "poll_interval: 1s\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("YAML lacks %q:\n%s", want, b)
		}
	}
	c2, err := Parse(b)
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, b)
	}
	b2, _ := c2.YAML()
	if string(b) != string(b2) {
		t.Errorf("round trip changed the config:\n%s\n---\n%s", b, b2)
	}
	if _, ok := c2.States.Heavy.Enter["mem_available_pct"]; ok {
		t.Errorf("heavy.enter gained a memory condition: %+v", c2.States.Heavy.Enter)
	}
}

func TestDefaultValidatesSettings(t *testing.T) {
	if err := Default().ValidateSettings(); err != nil {
		t.Errorf("defaults are invalid: %v", err)
	}
}

func TestLoadLenient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gearshift.yaml")
	doc := "control: { socket: /tmp/x.sock, colour: blue }\npid_file: /tmp/x.pid\ncpus: many\nvarnish: { targets: [] }\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Control.Socket != "/tmp/x.sock" || c.PIDFile != "/tmp/x.pid" || c.Log.File != Default().Log.File {
		t.Errorf("LoadLenient = socket %q, pid %q, log %q", c.Control.Socket, c.PIDFile, c.Log.File)
	}
	if _, err := Load(path); err == nil {
		t.Error("Load accepted what LoadLenient skipped")
	}
}

func TestParseSettingsIgnoresFiles(t *testing.T) {
	doc := "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: /nonexistent/secret } ] }\n"
	if _, err := ParseSettings([]byte(doc)); err != nil {
		t.Errorf("ParseSettings looked at the secret file: %v", err)
	}
	if _, err := ParseSettings([]byte(doc + "cpus: -1\nbogus: 1\n")); err == nil || !strings.Contains(err.Error(), "cpus:") || !strings.Contains(err.Error(), "bogus: unknown key") {
		t.Errorf("ParseSettings error = %v", err)
	}
	if _, err := Parse([]byte(doc)); err == nil {
		t.Error("Parse accepted a missing secret file")
	}
}

// rerunAsNobody runs the calling test again in a copy of the test binary
// as the user nobody, and fails when it does not pass there.
func rerunAsNobody(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "profiles.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s as nobody: %v\n%s", t.Name(), err, out)
	}
}

// Render trusts the validated config: every value that cannot go into the
// VCL is refused by validation, naming its key, and by nothing else.
func TestValidationGuardsRender(t *testing.T) {
	for _, tc := range []struct {
		key  string
		edit func(*Config)
	}{
		{"profiles.session_cookies[1]", func(c *Config) { c.Profiles.SessionCookies = []string{"ok", "bad name"} }},
		{"profiles.ignore_cookies[0]", func(c *Config) { c.Profiles.IgnoreCookies = []string{"a;b"} }},
		{"profiles.strip_set_cookies[1]", func(c *Config) { c.Profiles.StripSetCookies = []string{"PHPSESSID", "[x"} }},
		{"profiles.static_extensions[0]", func(c *Config) { c.Profiles.StaticExtensions = []string{".png"} }},
		{"profiles.never_cache[0]", func(c *Config) { c.Profiles.NeverCache = []string{"a\"}b"} }},
		{"profiles.never_cache[0]", func(c *Config) { c.Profiles.NeverCache = []string{""} }},
		{"profiles.purge_acl[0]", func(c *Config) { c.Profiles.PurgeACL = []string{"localhost"} }},
		{"profiles.static_ttl", func(c *Config) { c.Profiles.StaticTTL = 0 }},
		{"profiles.heavy_min_ttl", func(c *Config) { c.Profiles.HeavyMinTTL = 0 }},
		{"profiles.heavy_grace", func(c *Config) { c.Profiles.HeavyGrace = -1 }},
		{"profiles.moderate_heuristic_ttl", func(c *Config) { c.Profiles.ModerateHeuristicTTL = -1 }},
		{"profiles.pass_headers[0]", func(c *Config) { c.Profiles.PassHeaders = []string{"X Token"} }},
		{"backend.host", func(c *Config) { c.Backend.Host = `a"b` }},
		{"backend.host", func(c *Config) { c.Backend.Host = "a{b" }},
		{"backend.host", func(c *Config) { c.Backend.Host = "a\nb" }},
		{"backend.port", func(c *Config) { c.Backend.Port = 0 }},
	} {
		t.Run(tc.key, func(t *testing.T) {
			cfg := Default()
			tc.edit(cfg)
			err := cfg.ValidateSettings()
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Path != tc.key {
				t.Errorf("ValidateSettings = %v, want one problem at %s", err, tc.key)
			}
		})
	}
}

// A config whose only problems are files of this machine is used offline;
// one with any other problem is not.
func TestOffline(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	elsewhere := "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: /nonexistent/secret } ] }\n" +
		"profiles: { heavy: { vcl_file: /nonexistent/heavy.vcl } }\n"
	far := elsewhere + "states: { heavy: { enter: { load_per_cpu: 2.5 } } }\n"
	for _, tc := range []struct {
		name, doc string
		ok        bool
	}{
		{"files of another machine", far, true},
		{"and a bad threshold", far + "cpus: -1\n", false},
		{"groups of another machine", far + "control: { group: gearshift-no-such-group, admin_group: gearshift-no-such-admins }\n", true},
		{"a hook of another machine", far + "hooks: { on_change: [/nonexistent/gearshift-hook] }\n", true},
		{"a rule on a source not configured here", elsewhere + "states: { heavy: { enter: { load_per_cpu: 2.5, client_rps: 300 } } }\n", true},
		{"a hook named by a relative path", far + "hooks: { on_change: [bin/hook] }\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.doc)
			_, lerr := Load(path)
			if lerr == nil {
				t.Fatal("Load accepted a config naming absent files")
			}
			cfg, err := Offline(lerr)
			if !tc.ok {
				if err != lerr || cfg != nil {
					t.Errorf("Offline = %v, %v; want Load's error back", cfg, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.States.Heavy.Enter["load_per_cpu"]; got != 2.5 {
				t.Errorf("offline config's heavy enter load_per_cpu = %v, want the file's 2.5", got)
			}
		})
	}
	other := errors.New("read config: permission denied")
	if cfg, err := Offline(other); cfg != nil || err != other {
		t.Errorf("Offline(a read error) = %v, %v; want the error back", cfg, err)
	}
}

// manyTargets returns n flow-style targets on distinct ports.
func manyTargets(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{ admin: '127.0.0.1:%d', secret_file: '{{secret}}' }", 10000+i)
	}
	return b.String()
}

func TestParseMaxTargets(t *testing.T) {
	r := fixture(t)
	if _, err := Parse([]byte(r.Replace("varnish: { targets: [" + manyTargets(MaxTargets) + "] }"))); err != nil {
		t.Fatalf("Parse of %d targets: %v", MaxTargets, err)
	}
}

// A rule on the signal of a source that is not configured is refused,
// naming the key that would configure it, for every such signal.
func TestRuleNeedsItsSource(t *testing.T) {
	set, err := Default().Signals()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range set.All() {
		if s.Source == "" {
			continue
		}
		n++
		cfg := Default()
		// The sources the defaults turn on: backend_healthy's, and the
		// counters of the Varnish whose admin port is on loopback.
		cfg.Backend.Probe.URL = ""
		cfg.Varnish.Targets[0].Admin = "192.0.2.10:6082"
		cfg.States.Heavy.Enter[s.Name] = s.Max
		err := cfg.ValidateSettings()
		want := "states.heavy.enter." + s.Name + ": needs " + s.Source + " to be set"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a rule on %s without its source: %v, want %q", s.Name, err, want)
		}
	}
	if n == 0 {
		t.Error("no signal of the defaults' set has a source")
	}
	cfg := Default()
	cfg.States.Heavy.Enter["backend_healthy"] = 0.5 // sick: 0 <= 0.5
	if err := cfg.ValidateSettings(); err != nil {
		t.Errorf("a rule on backend_healthy with the default probe: %v", err)
	}
}

// A target on loopback without a name reads varnishd's default instance
// (varnishstat -n ""); one on another machine gives no counters unless
// it names a local instance.
func TestVarnishCountersOfTheDefaultInstance(t *testing.T) {
	for _, tc := range []struct {
		admin, name string
		want        []string
	}{
		{"127.0.0.1:6082", "", []string{""}},
		{"[::1]:6082", "", []string{""}},
		{"localhost:6082", "", []string{""}},
		{"192.0.2.10:6082", "", nil},
		{"192.0.2.10:6082", "www", []string{"www"}},
		{"127.0.0.1:6082", "/var/lib/varnish/www", []string{"/var/lib/varnish/www"}},
	} {
		cfg := Default()
		cfg.Varnish.Targets[0].Admin, cfg.Varnish.Targets[0].Name = tc.admin, tc.name
		if got := cfg.SensorConfig().Varnish; !slices.Equal(got, tc.want) {
			t.Errorf("admin %s, name %q: varnishstat -n %q, want %q", tc.admin, tc.name, got, tc.want)
		}
	}
}

package profiles

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// TestRenderGolden pins the VCL rendered from the default config. Run
// `go test ./profiles -run TestRenderGolden -update` after changing a
// template, and review the diff.
func TestRenderGolden(t *testing.T) {
	for _, s := range state.All {
		t.Run(s.String(), func(t *testing.T) {
			got := render(t, defaultSite(), s)
			golden.Check(t, filepath.Join("golden", s.String()+".vcl"), []byte(got))
		})
	}
}

// TestRenderCompiles compiles every gear of several configs with the real
// VCL compiler (varnishd -C: no child, no C compiler).
func TestRenderCompiles(t *testing.T) {
	bin := varnishtest.Binary(t)
	dir := searchableTempDir(t)
	for _, tc := range []struct {
		name string
		edit func(*Site)
	}{
		{"defaults", func(*Site) {}},
		{"empty lists", func(c *Site) {
			c.Options.SessionCookies = nil
			c.Options.StaticExtensions = nil
			c.Options.NeverCache = nil
			c.Options.PurgeACL = nil
		}},
		{"switches off", func(c *Site) {
			c.Options.NormalizeHost = false
			c.Options.ExposeHeaders = false
			c.Options.HeavyGrace = 0
		}},
		{"odd values", func(c *Site) {
			c.Backend = BackendAt("::1", 8081)
			c.Options.PurgeACL = []string{"10.1.2.3/8", "2001:db8::/32", "192.0.2.7"}
			c.Options.SessionCookies = []string{"a.b-c", `x\*y`, "[!0-9]?{3}*", "[A-Z_]{8}"}
			c.Options.NeverCache = []string{`^/(?:shop|basket)/`, `\?add-to-cart=`, `(?i)\.php$`}
			c.Options.HeavySessionTTL = timefmt.Duration(1500 * time.Millisecond)
		}},
		{"sites", func(c *Site) {
			c.Backend.MaxConnections = 40
			c.Routes = []Route{{Site: DefaultSite, MaxConnections: 20}, {Site: "shop", Hosts: []string{"shop.example", "*.shop.example"}, MaxConnections: 8},
				{Site: "w-1", Hosts: []string{"*.wiki.example"}}}
		}},
	} {
		cfg := defaultSite()
		tc.edit(cfg)
		for _, s := range state.All {
			t.Run(tc.name+"/"+s.String(), func(t *testing.T) {
				file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+"-"+s.String()+".vcl")
				if err := os.WriteFile(file, []byte(render(t, cfg, s)), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(bin, "-C", "-n", filepath.Join(dir, "n"), "-f", file).CombinedOutput()
				if err != nil {
					t.Errorf("varnishd -C %s: %v\n%s", file, err, lastLines(string(out), 20))
				}
			})
		}
	}
}

// searchableTempDir is a temp dir the VCL compiler, which runs as Varnish's
// unprivileged user, can read.
func searchableTempDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestCookieGlobRegex(t *testing.T) {
	for _, tc := range []struct {
		glob       string
		match, not []string
	}{
		{"PHPSESSID", []string{"PHPSESSID"}, []string{"PHPSESSIDX", "XPHPSESSID", "phpsessid", "PHPSESSI"}},
		{"wordpress_logged_in_*", []string{"wordpress_logged_in_", "wordpress_logged_in_5f3e0a"}, []string{"wordpress_logged_in", "wordpress_logged_inX", "xwordpress_logged_in_1"}},
		{"wp-postpass_*", []string{"wp-postpass_abc"}, []string{"wpXpostpass_abc"}},
		{"SESS*", []string{"SESS", "SESS0a9f"}, []string{"SSESS1", "sess1"}},
		{"[0-9a-f]{32}", []string{"0123456789abcdef0123456789abcdef", "ffffffffffffffffffffffffffffffff"},
			[]string{"0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0", "0123456789ABCDEF0123456789ABCDEF", "0123456789abcdeg0123456789abcdef"}},
		{"sess?", []string{"sess1", "sessA"}, []string{"sess", "sess12"}},
		{"a?{2}b", []string{"axyb"}, []string{"axb", "axyzb"}},
		{"x[!0-9]", []string{"xa", "x_"}, []string{"x1", "x", "xab"}},
		{"x[^a-c]", []string{"xd"}, []string{"xb"}},
		{"a.b", []string{"a.b"}, []string{"aXb"}},
		{"a+b", []string{"a+b"}, []string{"aab", "ab"}},
		{`star\*`, []string{"star*"}, []string{"starX", "star"}},
		{"(x)|y", []string{"(x)|y"}, []string{"x", "y"}},
		{"$x^", []string{"$x^"}, []string{"x"}},
	} {
		t.Run(tc.glob, func(t *testing.T) {
			re, err := CookieGlobRegex(tc.glob)
			if err != nil {
				t.Fatal(err)
			}
			// As the VCL uses it: after a separator, before '='.
			rx := regexp.MustCompile(`(^|;)\s*(?:` + re + `)=`)
			for _, name := range tc.match {
				if !rx.MatchString("a=1; " + name + "=v") {
					t.Errorf("regex %s does not match cookie %q", re, name)
				}
			}
			for _, name := range tc.not {
				if rx.MatchString("a=1; " + name + "=v") {
					t.Errorf("regex %s matches cookie %q", re, name)
				}
			}
			if rx.MatchString("a=" + tc.match[0] + "=v") {
				t.Errorf("regex %s matches inside a cookie value", re)
			}
		})
	}
}

func TestCookieGlobRegexErrors(t *testing.T) {
	for _, glob := range []string{"", "a b", "a;b", "a=b", "a,b", `a"b`, "[abc", "abc]", "a{3}", "[a]{0}", "[a]{x}", "[a]{3", "?{256}", "[]", "[!]", "[z-a]", `a\`, "caf\u00e9", "a}"} {
		t.Run(glob, func(t *testing.T) {
			if re, err := CookieGlobRegex(glob); err == nil {
				t.Errorf("CookieGlobRegex(%q) = %q, want an error", glob, re)
			}
		})
	}
}

func TestName(t *testing.T) {
	// sha256("vcl 4.1;\n") starts with these 8 hex digits.
	const text = "vcl 4.1;\n"
	got := Name(state.Heavy, text)
	if !regexp.MustCompile(`^gearshift-heavy-[0-9a-f]{8}$`).MatchString(got) {
		t.Fatalf("Name = %q", got)
	}
	if Name(state.Heavy, text) != got || Name(state.Heavy, text+" ") == got {
		t.Error("Name is not a function of the text")
	}
	if Name(state.Light, text)[:len("gearshift-light-")] != "gearshift-light-" {
		t.Errorf("Name(light) = %q", Name(state.Light, text))
	}
}

func TestBuild(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine.vcl")
	const text = "vcl 4.1;\nbackend default { .host = \"127.0.0.1\"; .port = \"9\"; }\n"
	if err := os.WriteFile(mine, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := defaultSite()
	cfg.Options.Moderate.VCLFile = mine
	set, err := Build(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range set {
		if p.Gear != state.Gear(i) {
			t.Errorf("set[%d].State = %s", i, p.Gear)
		}
		if p.Name != Name(p.Gear, p.VCL) {
			t.Errorf("%s: Name %q is not Name(state, VCL)", p.Gear, p.Name)
		}
	}
	if set[state.Moderate].VCL != text || set[state.Moderate].Source != mine {
		t.Errorf("moderate = %+v, want the file verbatim", set[state.Moderate])
	}
	if set[state.Light].Source != SourceBuiltin || set[state.Light].VCL != render(t, defaultSite(), state.Light) {
		t.Errorf("light is not the built-in profile")
	}

	again, err := Build(*cfg)
	if err != nil || again != set {
		t.Errorf("Build is not deterministic: %v", err)
	}

	cfg.Options.Heavy.VCLFile = filepath.Join(dir, "missing.vcl")
	_, err = Build(*cfg)
	if err == nil || !strings.HasPrefix(err.Error(), "profiles.heavy.vcl_file: open ") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Build with a missing file: %v", err)
	}

	// Never handed to Varnish, whose compiler would quote the file.
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.SecretFiles = []string{secret}
	for file, want := range map[string]string{
		secret:        "profiles.heavy.vcl_file: " + secret + " is the admin secret of varnish.targets[0]",
		mine + ".txt": "profiles.heavy.vcl_file: " + mine + ".txt is not a VCL program",
	} {
		if err := os.WriteFile(mine+".txt", []byte("s3cr3t and no declaration\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.Options.Heavy.VCLFile = file
		_, err = Build(*cfg)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Build with vcl_file %s: %v, want %q...", file, err, want)
		}
	}
}

// TestRenderValues checks that config values land where they belong.
func TestRenderValues(t *testing.T) {
	cfg := defaultSite()
	cfg.Backend = BackendAt("10.0.0.5", 8088)
	cfg.Options.StaticTTL = timefmt.Duration(90 * time.Second)
	cfg.Options.HeavyMinTTL = timefmt.Duration(5 * time.Minute)
	cfg.Options.HeavySessionTTL = timefmt.Duration(1500 * time.Millisecond)
	cfg.Options.HeavyGrace = timefmt.Duration(time.Hour)
	cfg.Options.ExposeHeaders = false
	heavy := render(t, cfg, state.Heavy)
	for _, want := range []string{
		`.host = "10.0.0.5";`, `.port = "8088";`,
		"set beresp.ttl = 90s;", "set beresp.ttl = 5m;", "set beresp.ttl = 1500ms;", "set beresp.grace = 1h;",
	} {
		if !strings.Contains(heavy, want) {
			t.Errorf("heavy VCL lacks %q", want)
		}
	}
	if strings.Contains(heavy, "X-Gearshift-Profile") || strings.Contains(heavy, "resp.http.X-Cache") {
		t.Error("expose_headers false, yet the VCL sets the headers")
	}
	cfg.Options.PassHeaders = []string{"X-Api-Key"}
	cfg.Options.ModerateHeuristicTTL = timefmt.Duration(45 * time.Second)
	for _, s := range state.All {
		text := render(t, cfg, s)
		// A custom list adds to Authorization, which every gear passes.
		if !strings.Contains(text, "if (req.http.Authorization) {") || !strings.Contains(text, "if (req.http.X-Api-Key) {") {
			t.Errorf("%s VCL does not pass Authorization and pass_headers", s)
		}
		// Every gear drops a session's cached pages on its writes,
		// whichever gear cached them.
		if !strings.Contains(text, "call gearshift_drop_session;") {
			t.Errorf("%s VCL does not drop a session's pages on its writes", s)
		}
	}
	if moderate := render(t, cfg, state.Moderate); !strings.Contains(moderate, "set beresp.ttl = 45s;") {
		t.Error("moderate VCL lacks moderate_heuristic_ttl")
	}
	cfg.Options.ModerateHeuristicTTL = 0
	cfg.Options.PassHeaders = nil
	moderate := render(t, cfg, state.Moderate)
	if strings.Contains(moderate, "heuristic freshness") {
		t.Error("moderate_heuristic_ttl 0 still rendered")
	}
	// An empty pass_headers list still passes Authorization.
	if !strings.Contains(moderate, "if (req.http.Authorization) {") {
		t.Error("an empty pass_headers list stops passing Authorization")
	}
}

func TestHasVCLDeclaration(t *testing.T) {
	for text, want := range map[string]bool{
		"vcl 4.1;":                          true,
		"vcl 4.0;\nbackend default none;":   true,
		"\ufeffvcl 4.1;":                    false,
		"  \n\tvcl  4.1  ;":                 true,
		"# c\n// c\n/* a\n b */vcl 4.1;":    true,
		"/* unterminated vcl 4.1;":          false,
		"# only a comment":                  false,
		"":                                  false,
		"vcl 4.2;":                          false,
		"vcl 4.1":                           false,
		"vcl4.1;":                           false,
		"VCL 4.1;":                          false,
		"backend default none;\nvcl 4.1;":   false,
		"s3cr3t\n":                          false,
		"vcl 4.10;":                         false,
		"/* */ /* */ vcl 4.1;":              true,
		"# c vcl 4.1;":                      false,
		"#c\r\nvcl 4.0;":                    true,
		"vcl 4.1;garbage is the compiler's": true,
	} {
		if got := hasVCLDeclaration([]byte(text)); got != want {
			t.Errorf("hasVCLDeclaration(%q) = %v, want %v", text, got, want)
		}
	}
}

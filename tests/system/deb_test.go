package system

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller"
	"github.com/gearshift/gearshift/internal/testsupport/testenv"
	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

// run runs a program and returns its combined output; a non-zero exit is
// an error carrying the output.
func run(tb testing.TB, env []string, name string, args ...string) (string, error) {
	tb.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(append(os.Environ(), "NOTIFY_SOCKET=", "LC_ALL=C"), env...)
	err := cmd.Run()
	if err != nil {
		return out.String(), errors.New(name + " " + strings.Join(args, " ") + ": " + err.Error() + "\n" + out.String())
	}
	return out.String(), nil
}

func mustRun(tb testing.TB, env []string, name string, args ...string) string {
	tb.Helper()
	out, err := run(tb, env, name, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// buildDeb builds the package with scripts/deb/build.sh into dir, with a
// fixed SOURCE_DATE_EPOCH, and returns its path.
func buildDeb(tb testing.TB, dir string) string {
	tb.Helper()
	testenv.Need(tb, "dpkg-deb", "dpkg")
	mustRun(tb, []string{"SOURCE_DATE_EPOCH=1764547200"}, "sh", filepath.Join("..", "..", "scripts", "deb", "build.sh"), dir)
	debs, _ := filepath.Glob(filepath.Join(dir, "gearshift_*.deb"))
	if len(debs) != 1 {
		tb.Fatalf("want one gearshift_*.deb in %s, got %v", dir, debs)
	}
	return debs[0]
}

var sharedDeb struct {
	once sync.Once
	path string
}

// theDeb is one package build shared by the tests of this run.
func theDeb(tb testing.TB) string {
	tb.Helper()
	sharedDeb.once.Do(func() {
		// Beside the test binary, which TestMain removes at the end.
		dir := filepath.Join(filepath.Dir(gearshiftBin), "deb")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		sharedDeb.path = buildDeb(tb, dir)
	})
	if sharedDeb.path == "" {
		tb.Fatal("the package build failed (see the first test that built it)")
	}
	return sharedDeb.path
}

// The package as built: its name and fields, its files, owners and modes,
// its conffiles, lintian's verdict, and the same bytes on a second build.
func TestDebPackage(t *testing.T) {
	deb := theDeb(t)
	arch := strings.TrimSpace(mustRun(t, nil, "dpkg", "--print-architecture"))
	if want := "gearshift_" + controller.Version + "_" + arch + ".deb"; filepath.Base(deb) != want {
		t.Errorf("package file %s, want %s", filepath.Base(deb), want)
	}
	fields := mustRun(t, nil, "dpkg-deb", "-f", deb, "Package", "Version", "Architecture", "Section")
	if want := "Package: gearshift\nVersion: " + controller.Version + "\nArchitecture: " + arch + "\nSection: admin\n"; fields != want {
		t.Errorf("control fields:\n%s\nwant:\n%s", fields, want)
	}
	// Varnish may run on another host; where it runs here, its profiles
	// want varnish-modules (xkey, vsthrottle) beside it.
	if got := mustRun(t, nil, "dpkg-deb", "-f", deb, "Recommends"); got != "varnish, varnish-modules\n" {
		t.Errorf("Recommends %q, want varnish and varnish-modules", got)
	}
	if got := mustRun(t, nil, "dpkg-deb", "-I", deb, "conffiles"); got != "/etc/cron.d/gearshift\n/etc/gearshift/gearshift.yaml\n/etc/logrotate.d/gearshift\n" {
		t.Errorf("conffiles:\n%s", got)
	}

	listing := map[string]string{} // path -> "mode owner"
	for _, line := range strings.Split(mustRun(t, nil, "dpkg-deb", "-c", deb), "\n") {
		if f := strings.Fields(line); len(f) >= 6 {
			listing[strings.TrimPrefix(f[5], ".")] = f[0] + " " + f[1]
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/gearshift":                                       "-rwxr-xr-x root/root",
		"/etc/gearshift/gearshift.yaml":                            "-rw-r----- root/root",
		"/etc/cron.d/gearshift":                                    "-rw-r--r-- root/root",
		"/etc/logrotate.d/gearshift":                               "-rw-r--r-- root/root",
		"/lib/systemd/system/gearshift.service":                    "-rw-r--r-- root/root",
		"/usr/share/man/man8/gearshift.8.gz":                       "-rw-r--r-- root/root",
		"/usr/share/man/man8/gearshift-check.8.gz":                 "-rw-r--r-- root/root",
		"/usr/share/bash-completion/completions/gearshift":         "-rw-r--r-- root/root",
		"/usr/share/zsh/vendor-completions/_gearshift":             "-rw-r--r-- root/root",
		"/usr/share/fish/vendor_completions.d/gearshift.fish":      "-rw-r--r-- root/root",
		"/usr/share/doc/gearshift/README.md.gz":                    "-rw-r--r-- root/root",
		"/usr/share/doc/gearshift/docs/operating.md.gz":            "-rw-r--r-- root/root",
		"/usr/share/doc/gearshift/docs/fleet.md.gz":                "-rw-r--r-- root/root",
		"/usr/share/doc/gearshift/copyright":                       "-rw-r--r-- root/root",
		"/usr/share/doc/gearshift/changelog.gz":                    "-rw-r--r-- root/root",
		"/usr/share/doc/gearshift/examples/gearshift.yaml":         "-rw-r--r-- root/root",
		"/usr/share/lintian/overrides/gearshift":                   "-rw-r--r-- root/root",
		"/usr/share/gearshift/hooks/webhook.sh":                    "-rwxr-xr-x root/root",
		"/usr/share/gearshift/varnish/gearshift-label.vcl":         "-rw-r--r-- root/root",
		"/usr/share/gearshift/monitoring/gearshift-dashboard.json": "-rw-r--r-- root/root",
		"/usr/share/gearshift/monitoring/gearshift-alerts.yml":     "-rw-r--r-- root/root",
	} {
		if got, ok := listing[path]; !ok {
			t.Errorf("%s not in the package", path)
		} else if got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}

	// The installed files name the installed binary.
	tree := t.TempDir()
	mustRun(t, nil, "dpkg-deb", "-x", deb, tree)
	for path, want := range map[string]string{
		"lib/systemd/system/gearshift.service": "\nExecStart=/usr/bin/gearshift run --config /etc/gearshift/gearshift.yaml\n",
		"etc/cron.d/gearshift":                 "\n#* * * * *\troot\t/usr/bin/gearshift check --restart --quiet\n",
		"etc/gearshift/gearshift.yaml":         "/usr/share/gearshift/hooks/",
		"usr/share/gearshift/hooks/webhook.sh": "on_change: [/usr/share/gearshift/hooks/webhook.sh",
	} {
		b, _ := os.ReadFile(filepath.Join(tree, path))
		if !strings.Contains(string(b), want) || strings.Contains(string(b), "/usr/local/bin/gearshift") || strings.Contains(string(b), "/usr/local/share/gearshift") {
			t.Errorf("%s: want %q in:\n%s", path, want, b)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(tree, "lib/systemd/system/gearshift.service"))
	if !strings.Contains(string(unit), "\nDocumentation=man:gearshift(8)") {
		t.Errorf("the unit's Documentation= does not name gearshift(8):\n%s", unit)
	}

	t.Run("lintian", func(t *testing.T) {
		lintian := testenv.Need(t, "lintian", "lintian")
		out, err := run(t, nil, lintian, "--pedantic", "--display-info", "--fail-on", "error,warning,info,pedantic", deb)
		// lintian says so when it runs as root; that is not about the package.
		out = strings.ReplaceAll(out, "running with root privileges is not recommended!", "")
		// The override for misspellings read across Go's packed strings is
		// unused in a build whose strings happen to meet harmlessly: lintian
		// then says so (and exits non-zero on that alone), which is no
		// finding about the package.
		var findings []string
		for _, line := range strings.Split(out, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "",
				strings.HasPrefix(line, "I: gearshift: unused-override spelling-error-in-binary "),
				// lintian's count of overridden hints, a summary, not a finding
				strings.HasPrefix(line, "N: ") && strings.Contains(line, "overridden"):
				continue
			}
			findings = append(findings, line)
		}
		if len(findings) > 0 || (err != nil && !strings.Contains(out, "unused-override spelling-error-in-binary")) {
			t.Errorf("lintian: %v\n%s", err, strings.Join(findings, "\n"))
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		again := buildDeb(t, t.TempDir())
		a, _ := os.ReadFile(deb)
		b, _ := os.ReadFile(again)
		if sha256.Sum256(a) != sha256.Sum256(b) {
			t.Error("two builds of the same tree give different packages")
		}
	})
}

// dpkgLock serialises the tests that install the package: every worktree
// of this machine may run its suite at once, and dpkg takes one package at
// a time.
func dpkgLock(tb testing.TB) {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "gearshift-dpkg-test.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
}

// dpkg runs dpkg, waiting while another process (apt) holds its lock.
func dpkg(tb testing.TB, args ...string) string {
	tb.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err := run(tb, []string{"DEBIAN_FRONTEND=noninteractive"}, "dpkg", args...)
		if err == nil {
			return out
		}
		if !strings.Contains(out, "lock") || time.Now().After(deadline) {
			tb.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
}

// alive reports whether pid runs; a zombie (the daemon detached, so init
// reaps it, whenever it does) has exited.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

func daemonPID(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile("/run/gearshift/gearshift.pid")
	if err != nil {
		tb.Fatalf("no pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		tb.Fatalf("pid file: %v", err)
	}
	return pid
}

// savedPrefix names what TestDebInstallRoundTrip set aside.
const savedPrefix = ".deb-test-saved-"

// leftovers lists what on this machine still carries gearshift's name, in
// the places a package or its scripts write to.
func leftovers() []string {
	var found []string
	for _, root := range []string{
		"/etc", "/lib/systemd", "/usr/lib/systemd", "/usr/bin", "/usr/sbin", "/usr/share/man",
		"/usr/share/doc", "/usr/share/bash-completion", "/usr/share/zsh", "/usr/share/fish",
		"/usr/share/lintian", "/var/lib/dpkg/info", "/var/lib/systemd", "/var/lib/gearshift", "/var/log", "/run",
	} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if strings.HasPrefix(d.Name(), savedPrefix) {
				return filepath.SkipDir
			}
			if strings.Contains(d.Name(), "gearshift") {
				found = append(found, path)
				if d.IsDir() {
					return filepath.SkipDir
				}
			}
			return nil
		})
	}
	return found
}

// The package on this machine, as an admin uses it: dpkg -i; it is enabled
// but not started; version, config check, man and completion work; an
// edited config survives a reinstall, which restarts a running daemon;
// dpkg -r stops it and keeps the config and logs; dpkg -P leaves nothing.
// It installs a real package, so it runs as root (CI) and only where no
// gearshift is installed.
func TestDebInstallRoundTrip(t *testing.T) {
	testenv.RequireRoot(t, "the package round trip (dpkg -i)")
	deb := theDeb(t)
	v := varnishtest.Start(t, varnishtest.Config{})
	dpkgLock(t)
	// Never over a real installation: a developer's machine is left alone,
	// and CI, which runs on a fresh machine, says what is in the way.
	notHere := func(format string, args ...any) { t.Helper(); testenv.Unavailable(t, format, args...) }
	if out, _ := run(t, nil, "dpkg-query", "-W", "-f=${db:Status-Abbrev}", "gearshift"); strings.HasPrefix(out, "i") || strings.HasPrefix(out, "r") {
		notHere("a gearshift package is installed on this machine (dpkg -P gearshift removes it): not touching it")
	}
	// The default runtime and log directories may hold what a test's
	// daemon left there (several source trees' suites share a machine):
	// they are set aside while the package owns them and put back after.
	// A daemon still running there is in the way.
	if b, err := os.ReadFile("/run/gearshift/gearshift.pid"); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); alive(pid) {
			notHere("a gearshift daemon (pid %d) runs on /run/gearshift: not touching it", pid)
		}
	}
	for _, dir := range []string{"/run/gearshift", "/var/log/gearshift", "/var/lib/gearshift"} {
		saved := filepath.Join(filepath.Dir(dir), savedPrefix+strconv.Itoa(os.Getpid()))
		err := os.Rename(dir, saved)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.RemoveAll(dir)
			os.Rename(saved, dir)
		})
	}
	if left := leftovers(); len(left) > 0 {
		notHere("gearshift files already on this machine, not touching them: %v", left)
	}
	t.Cleanup(func() {
		if _, err := os.Stat("/var/lib/dpkg/info/gearshift.list"); err == nil || len(leftovers()) > 0 {
			run(t, nil, "/usr/bin/gearshift", "stop")
			run(t, []string{"DEBIAN_FRONTEND=noninteractive"}, "dpkg", "-P", "gearshift")
			os.RemoveAll("/var/log/gearshift")
			os.RemoveAll("/var/lib/gearshift")
			os.RemoveAll("/run/gearshift")
		}
	})

	out := dpkg(t, "-i", deb)
	if !strings.Contains(out, "gearshift is installed but not started") {
		t.Errorf("dpkg -i does not say gearshift is not started:\n%s", out)
	}
	if _, err := os.Stat("/run/gearshift/gearshift.pid"); err == nil {
		t.Error("a first install started the daemon")
	}
	for _, path := range []string{
		"/usr/bin/gearshift", "/etc/gearshift/gearshift.yaml", "/lib/systemd/system/gearshift.service",
		"/etc/cron.d/gearshift", "/etc/logrotate.d/gearshift", "/usr/share/man/man8/gearshift.8.gz",
		"/usr/share/bash-completion/completions/gearshift", "/usr/share/doc/gearshift/copyright",
	} {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	conffiles := mustRun(t, nil, "dpkg-query", "-W", "-f=${Conffiles}", "gearshift")
	for _, c := range []string{"/etc/gearshift/gearshift.yaml", "/etc/cron.d/gearshift", "/etc/logrotate.d/gearshift"} {
		if !strings.Contains(conffiles, " "+c+" ") {
			t.Errorf("dpkg does not hold %s as a conffile:\n%s", c, conffiles)
		}
	}
	for _, dir := range []string{"/var/log/gearshift", "/var/lib/gearshift/history"} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode() != 0o750|os.ModeDir {
			t.Errorf("%s: %v %v, want a 0750 directory", dir, fi, err)
		}
	}
	if link, err := os.Readlink("/etc/systemd/system/multi-user.target.wants/gearshift.service"); err != nil || link != "/lib/systemd/system/gearshift.service" {
		t.Errorf("the unit is not enabled: %q %v", link, err)
	}

	if out := mustRun(t, nil, "/usr/bin/gearshift", "version"); !strings.HasPrefix(out, "gearshift "+controller.Version+" ") {
		t.Errorf("gearshift version: %q", out)
	}
	// The shipped config works as it is with Debian's varnish package (its
	// /etc/varnish/secret).
	if _, err := os.Stat("/etc/varnish/secret"); err != nil {
		t.Fatalf("Debian's varnish package leaves /etc/varnish/secret: %v", err)
	}
	if out := mustRun(t, nil, "/usr/bin/gearshift", "config", "check"); !strings.Contains(out, "config OK: /etc/gearshift/gearshift.yaml") {
		t.Errorf("gearshift config check: %q", out)
	}
	testenv.Need(t, "man", "man-db")
	plain := regexp.MustCompile("\x1b\\[[0-9;]*m|.\x08")
	for page, want := range map[string]string{
		"gearshift":       "GEARSHIFT(8)",
		"gearshift-check": "GEARSHIFT <STATUS> - <summary> | <perfdata>",
	} {
		got := plain.ReplaceAllString(mustRun(t, []string{"MANWIDTH=120", "MANPAGER=cat", "PAGER=cat"}, "man", page), "")
		if !strings.Contains(got, want) {
			t.Errorf("man %s lacks %q:\n%s", page, want, got)
		}
	}
	if out := mustRun(t, nil, "bash", "-c", "source /usr/share/bash-completion/completions/gearshift && complete -p gearshift"); !strings.Contains(out, "gearshift") {
		t.Errorf("bash completion not registered: %q", out)
	}

	// The admin points the config at a Varnish (an edit dpkg keeps) and
	// starts gearshift; no systemd here, so by hand.
	conf := "/etc/gearshift/gearshift.yaml"
	b, _ := os.ReadFile(conf)
	edited := strings.ReplaceAll(strings.ReplaceAll(string(b), "127.0.0.1:6082", v.AdminAddr), "/etc/varnish/secret", v.SecretFile)
	if err := os.WriteFile(conf, []byte(edited), 0o640); err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, "/usr/bin/gearshift", "start")
	before := daemonPID(t)

	out = dpkg(t, "-i", deb)
	if strings.Contains(out, "not started") {
		t.Errorf("an upgrade speaks as a first install:\n%s", out)
	}
	if got, _ := os.ReadFile(conf); string(got) != edited {
		t.Errorf("a reinstall overwrote the edited config:\n%s", got)
	}
	after := daemonPID(t)
	if after == before || alive(before) || !alive(after) {
		t.Errorf("a reinstall did not restart the running daemon: pid %d before, %d after", before, after)
	}
	if out := mustRun(t, nil, "/usr/bin/gearshift", "status"); !strings.Contains(out, "gearshift "+controller.Version) {
		t.Errorf("gearshift status after the reinstall:\n%s", out)
	}
	// The daemon records its history where the package made room for it.
	today := filepath.Join("/var/lib/gearshift/history", time.Now().UTC().Format("2006-01-02")+".csv")
	if fi, err := os.Stat(today); err != nil || fi.Size() == 0 {
		t.Errorf("the daemon recorded no history: %v", err)
	}

	dpkg(t, "-r", "gearshift")
	if alive(after) {
		t.Error("dpkg -r left the daemon running")
	}
	for path, want := range map[string]bool{
		"/usr/bin/gearshift": false, "/run/gearshift": false, "/lib/systemd/system/gearshift.service": false,
		conf: true, "/var/log/gearshift/gearshift.log": true, "/var/lib/gearshift/history": true,
	} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("after dpkg -r, %s exists: %v, want %v", path, err == nil, want)
		}
	}

	dpkg(t, "-P", "gearshift")
	if left := leftovers(); len(left) > 0 {
		t.Errorf("dpkg -P left behind: %v", left)
	}
}

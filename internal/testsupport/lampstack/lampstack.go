// Package lampstack starts, for gearshift's integration tests, the servers
// a PHP site runs on (a private MariaDB, Apache with mod_php or with
// PHP-FPM) on free loopback ports under a test's temp dir, and drives the
// site through a test Varnish as browsers with cookie jars do, or
// measures its throughput with wrk.
package lampstack

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// Need returns the path of each program (or file, when absolute), or ends
// the test as internal/testenv does for a missing tool: a failure in CI, a
// skip elsewhere, naming packages, the Debian packages to install.
func Need(tb testing.TB, packages string, progs ...string) map[string]string {
	tb.Helper()
	paths := map[string]string{}
	var missing []string
	for _, p := range progs {
		path, ok := testenv.Lookup(p)
		if !ok {
			missing = append(missing, p)
			continue
		}
		paths[p] = path
	}
	if len(missing) > 0 {
		testenv.Unavailable(tb, "%s not found: run scripts/install-deps.sh (Debian packages %s)", strings.Join(missing, ", "), packages)
	}
	return paths
}

// Searchable makes every directory from dir up to the temp root
// searchable, for Apache's and the VCL compiler's unprivileged users.
func Searchable(tb testing.TB, dir string) {
	tb.Helper()
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	_, p, _ := net.SplitHostPort(testenv.FreeAddr(tb))
	n, _ := strconv.Atoi(p)
	return n
}

// Daemon is a server process started by a test, stopped by pid when the
// test ends.
type Daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartDaemon starts args in a session of its own, its output appended to
// logFile, and registers its stop with tb.Cleanup.
func StartDaemon(tb testing.TB, name, logFile string, args ...string) *Daemon {
	tb.Helper()
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own session: Apache signals its whole process group on SIGTERM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	testenv.DiesWithTest(cmd)
	if err := cmd.Start(); err != nil {
		log.Close()
		tb.Fatalf("start %s: %v", name, err)
	}
	d := &Daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); log.Close(); close(d.done) }()
	tb.Cleanup(d.Stop)
	return d
}

// Stop ends the daemon: SIGTERM, then SIGKILL after 30 s.
func (d *Daemon) Stop() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

// Exited tells whether the daemon's process has ended.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// LastLines returns the last n lines of file, for a failure message.
func LastLines(file string, n int) string {
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitFor polls cond every 50ms for up to d.
func WaitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// WriteFile writes text to path, creating its directory.
func WriteFile(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// RandomHex returns n random bytes in hex.
func RandomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// RepoFile returns the absolute path of rel, a path from the root of
// gearshift's source tree (the directory holding go.mod), wherever the
// test runs from.
func RepoFile(tb testing.TB, rel string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("no go.mod above the test's directory to find %s", rel)
		}
		dir = parent
	}
}

// MariaDB is a private MariaDB server: its own data directory, socket and
// loopback port; root without a password.
type MariaDB struct {
	Port   int
	Socket string
	client string
	slap   string
}

// MariaDBPrograms are the programs StartMariaDB needs in its bin map.
var MariaDBPrograms = []string{"mariadbd", "mariadb-install-db", "mariadb", "mariadb-slap"}

// StartMariaDB creates a data directory under dir and starts mariadbd on
// it; bin maps MariaDBPrograms to their paths (see Need).
func StartMariaDB(tb testing.TB, dir string, bin map[string]string) *MariaDB {
	tb.Helper()
	data := filepath.Join(dir, "mysql")
	args := []string{bin["mariadb-install-db"], "--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}
	var userArgs []string
	if u, err := user.Current(); err == nil {
		userArgs = []string{"--user=" + u.Username}
	}
	out, err := exec.Command(args[0], append(args[1:], userArgs...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m := &MariaDB{Port: FreePort(tb), Socket: filepath.Join(dir, "mysql.sock"), client: bin["mariadb"], slap: bin["mariadb-slap"]}
	errLog := filepath.Join(dir, "mariadb.err")
	d := StartDaemon(tb, "mariadbd", filepath.Join(dir, "mariadb.out"), append([]string{bin["mariadbd"], "--no-defaults",
		"--datadir=" + data, "--socket=" + m.Socket, "--port=" + strconv.Itoa(m.Port),
		"--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "mariadb.pid"),
		"--log-error=" + errLog, "--skip-log-bin", "--skip-name-resolve",
		"--innodb-buffer-pool-size=32M", "--performance-schema=OFF"}, userArgs...)...)
	if !WaitFor(30*time.Second, func() bool { _, err := m.Query("SELECT 1"); return err == nil || d.Exited() }) || d.Exited() {
		tb.Fatalf("mariadbd did not start:\n%s", LastLines(errLog, 10))
	}
	return m
}

// Sleep holds conns connections to the database busy for d, each in
// SELECT SLEEP: threads running in the server, no CPU used. One
// mariadb-slap process makes the connections, so starting them costs the
// machine next to nothing. The returned wait ends with them; it may be
// called more than once.
func (m *MariaDB) Sleep(conns int, d time.Duration) (wait func() error) {
	// mariadb-slap connects to its schema, but creates it only for the
	// queries it generates itself; it must not drop it either.
	if _, err := m.Query("CREATE DATABASE IF NOT EXISTS gearshift_slap"); err != nil {
		return func() error { return err }
	}
	cmd := exec.Command(m.slap, "--no-defaults", "-S", m.Socket, "-u", "root",
		"--concurrency="+strconv.Itoa(conns), "--number-of-queries="+strconv.Itoa(conns),
		fmt.Sprintf("--query=SELECT SLEEP(%d)", int(d.Seconds())), "--create-schema=gearshift_slap", "--no-drop")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return func() error { return err }
	}
	return sync.OnceValue(func() error {
		// mariadb-slap exits 0 even when its connections fail.
		if err := cmd.Wait(); err != nil || strings.Contains(out.String(), "Error") {
			return fmt.Errorf("mariadb-slap: %v: %s", err, out.String())
		}
		return nil
	})
}

// Query runs SQL as root with the mariadb client and returns its
// tab-separated rows.
func (m *MariaDB) Query(sql string) (string, error) {
	out, err := exec.Command(m.client, "--no-defaults", "-S", m.Socket, "-u", "root", "-N", "-B", "-e", sql).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadb %q: %v: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Stack is how Apache runs a site's PHP.
type Stack int

const (
	// ModPHP: the prefork MPM with mod_php, as Debian's
	// libapache2-mod-php sets it up.
	ModPHP Stack = iota
	// FPM: the event MPM handing .php to a private PHP-FPM pool over its
	// unix socket with proxy_fcgi, as Debian's php8.2-fpm with `a2enconf
	// php8.2-fpm` does; the pool's status at /fpm-status, served on a
	// pm.status_listen socket of its own.
	FPM
)

func (s Stack) String() string {
	if s == FPM {
		return "fpm"
	}
	return "mod_php"
}

// Packages are the Debian packages that run PHP on s, for Need's message.
func (s Stack) Packages() string {
	if s == FPM {
		return "apache2, php8.2-fpm"
	}
	return "apache2, libapache2-mod-php"
}

// Stacks are the ways StartApache runs PHP, in the order EachStack runs
// them.
var Stacks = []Stack{ModPHP, FPM}

// EachStack runs fn as a subtest for each of Stacks, named after it
// ("mod_php", "fpm"), so that one test body covers both ways a LAMP
// server runs PHP and -run 'Test/fpm' picks one.
func EachStack(t *testing.T, fn func(t *testing.T, php Stack)) {
	t.Helper()
	for _, php := range Stacks {
		t.Run(php.String(), func(t *testing.T) { fn(t, php) })
	}
}

// Apache describes a site for StartApache.
type Apache struct {
	Dir   string // config, logs and pid file; PHP's errors in Dir/php-error.log
	Root  string // the DocumentRoot
	Port  int    // loopback port to listen on
	Stack Stack  // how PHP runs: ModPHP (the zero value) or FPM
	// Directory holds directives for <Directory Root>, after
	// "Options FollowSymLinks" and "Require all granted".
	Directory string
	// Conf is appended to the server's config: aliases, environment,
	// more <Directory> blocks.
	Conf string
	// Probe is a path that answers 200 once the site is served.
	Probe string
}

// FPMSocket is the FPM stack's pool socket, and FPMStatusSocket its
// pm.status_listen (pm.status_path /fpm-status, also routed by Apache
// for loopback clients).
func (a Apache) FPMSocket() string       { return filepath.Join(a.Dir, "fpm.sock") }
func (a Apache) FPMStatusSocket() string { return filepath.Join(a.Dir, "fpm-status.sock") }

// FPMMaxChildren is the FPM stack's pm.max_children: as many as the mod_php
// stack's MaxRequestWorkers.
const FPMMaxChildren = 16

// ApachePrograms are the programs StartApache needs in its bin map.
var ApachePrograms = []string{"apache2"}

// StartApache serves a.Root with PHP as a.Stack says (its sessions in
// a.Dir), mod_rewrite, mod_alias and mod_env, and gearshift's shipped
// mod_remoteip snippet (the visitor's address from X-Forwarded-For), and
// returns once a.Probe answers 200. Apache, and the FPM stack's php-fpm,
// stop when the test ends; a php-fpm still running for a.Dir (after
// StopApache) serves the new Apache.
func StartApache(tb testing.TB, a Apache, bin map[string]string) {
	tb.Helper()
	mods := "/usr/lib/apache2/modules"
	var php []string
	if a.Stack == ModPHP {
		php, _ = filepath.Glob(filepath.Join(mods, "libphp*.so"))
		if len(php) == 0 {
			Need(tb, "apache2, libapache2-mod-php", filepath.Join(mods, "libphp8.2.so"))
		}
	}
	users := ""
	if os.Geteuid() == 0 {
		users = "User www-data\nGroup www-data"
	}
	phpLog := filepath.Join(a.Dir, "php-error.log")
	WriteFile(tb, phpLog, "")
	os.Chmod(phpLog, 0o666)
	// PHP's sessions stay in the test's dir, written by Apache's user.
	sessions := filepath.Join(a.Dir, "php-sessions")
	if err := os.MkdirAll(sessions, 0o755); err != nil {
		tb.Fatal(err)
	}
	os.Chmod(sessions, 0o1733)
	var mpm, phpConf string
	if a.Stack == FPM {
		mpm, phpConf = fpmConf(tb, a, mods, phpLog, sessions)
	} else {
		mpm, phpConf = modPHPConf(mods, php[0], phpLog, sessions)
	}
	conf := fmt.Sprintf(`ServerRoot %[1]q
ServerName 127.0.0.1
Listen 127.0.0.1:%[2]d
PidFile %[1]s/apache.pid
DefaultRuntimeDir %[1]s
Mutex file:%[1]s default
ErrorLog %[1]s/apache-error.log
LogLevel warn
%[3]s
%[5]s
LoadModule authz_core_module  %[4]s/mod_authz_core.so
LoadModule mime_module        %[4]s/mod_mime.so
LoadModule dir_module         %[4]s/mod_dir.so
LoadModule alias_module       %[4]s/mod_alias.so
LoadModule env_module         %[4]s/mod_env.so
LoadModule setenvif_module    %[4]s/mod_setenvif.so
LoadModule rewrite_module     %[4]s/mod_rewrite.so
LoadModule remoteip_module    %[4]s/mod_remoteip.so
TypesConfig /etc/mime.types
DocumentRoot %[6]q
DirectoryIndex index.php
# The last field is "cookie" when the request had any (a logged-in
# user's), else "-": an anonymous visitor's fetch.
SetEnvIf Cookie "." gs_cookie=cookie
LogFormat "%%a %%h \"%%r\" %%>s %%{gs_cookie}e" visitor
# Varnish's health probe (backend.probe) is no visitor's request.
SetEnvIf User-Agent "^gearshift-probe$" gearshift_probe
CustomLog %[12]q visitor env=!gearshift_probe
Include %[7]q
<Directory />
    AllowOverride None
    Require all denied
</Directory>
<Directory %[6]q>
    Options FollowSymLinks
    Require all granted
%[9]s
</Directory>
%[8]s
%[10]s
`, a.Dir, a.Port, users, mods, mpm, a.Root, RepoFile(tb, "scripts/wordpress/remoteip.conf"), phpConf, a.Directory, a.Conf, sessions, AccessLog(a.Dir))
	file := filepath.Join(a.Dir, "apache.conf")
	WriteFile(tb, file, conf)
	if out, err := exec.Command(bin["apache2"], "-f", file, "-t").CombinedOutput(); err != nil {
		tb.Fatalf("apache2 -t: %v\n%s", err, out)
	}
	d := StartDaemon(tb, "apache2", filepath.Join(a.Dir, "apache.out"), bin["apache2"], "-f", file, "-DFOREGROUND")
	url := fmt.Sprintf("http://127.0.0.1:%d%s", a.Port, a.Probe)
	if !WaitFor(20*time.Second, func() bool {
		r, err := http.Get(url)
		if err == nil {
			r.Body.Close()
		}
		return (err == nil && r.StatusCode == 200) || d.Exited()
	}) || d.Exited() {
		tb.Fatalf("apache did not answer %s:\n%s", url, LastLines(filepath.Join(a.Dir, "apache-error.log"), 10))
	}
}

// modPHPConf is the mod_php stack's MPM and PHP settings.
func modPHPConf(mods, php, phpLog, sessions string) (mpm, conf string) {
	mpm = fmt.Sprintf(`LoadModule mpm_prefork_module %s/mod_mpm_prefork.so
StartServers 4
MinSpareServers 2
MaxSpareServers 8
MaxRequestWorkers 16`, mods)
	conf = fmt.Sprintf(`LoadModule php_module %s
<FilesMatch "\.php$">
    SetHandler application/x-httpd-php
</FilesMatch>
php_admin_flag  display_errors Off
php_admin_value error_log %q
php_admin_value session.save_path %q`, php, phpLog, sessions)
	return mpm, conf
}

// fpmConf starts the FPM stack's php-fpm unless it runs already, and
// returns the event MPM's settings and the proxy_fcgi lines of Debian's
// php8.2-fpm.conf pointed at its pool.
func fpmConf(tb testing.TB, a Apache, mods, phpLog, sessions string) (mpm, conf string) {
	tb.Helper()
	if c, err := net.Dial("unix", a.FPMStatusSocket()); err == nil {
		// The pool an earlier StartApache with this Dir started still
		// runs (StopApache stops Apache alone): a server keeps php-fpm
		// across Apache's restarts too.
		c.Close()
	} else {
		startFPM(tb, a, phpLog, sessions)
	}
	return fpmMPM(a, mods)
}

// startFPM starts a private php-fpm, a pool of FPMMaxChildren children on
// a.FPMSocket() (as www-data when the test runs as root), stopped when
// the test ends.
func startFPM(tb testing.TB, a Apache, phpLog, sessions string) {
	tb.Helper()
	fpm := Need(tb, "php8.2-fpm", "php-fpm8.2")["php-fpm8.2"]
	args := []string{fpm, "-F", "-y", filepath.Join(a.Dir, "php-fpm.conf")}
	user := ""
	if os.Geteuid() == 0 {
		// The master keeps root (hence -R); the children are www-data's.
		user = "user = www-data\ngroup = www-data\nlisten.owner = www-data\nlisten.group = www-data\nlisten.mode = 0660\n"
		args = append(args, "-R")
	}
	WriteFile(tb, filepath.Join(a.Dir, "php-fpm.conf"), fmt.Sprintf(`[global]
pid = %[1]s/php-fpm.pid
error_log = %[1]s/php-fpm.log
daemonize = no

[site]
%[2]slisten = %[3]s
pm = static
pm.max_children = %[6]d
pm.status_path = /fpm-status
pm.status_listen = %[4]s
catch_workers_output = yes
php_admin_flag[display_errors] = off
php_admin_value[error_log] = %[5]s
php_admin_value[session.save_path] = %[7]s
`, a.Dir, user, a.FPMSocket(), a.FPMStatusSocket(), phpLog, FPMMaxChildren, sessions))
	d := StartDaemon(tb, "php-fpm8.2", filepath.Join(a.Dir, "php-fpm.out"), args...)
	if !WaitFor(15*time.Second, func() bool {
		c, err := net.Dial("unix", a.FPMStatusSocket())
		if err == nil {
			c.Close()
		}
		return err == nil || d.Exited()
	}) || d.Exited() {
		tb.Fatalf("php-fpm8.2 did not listen on %s:\n%s", a.FPMSocket(), LastLines(filepath.Join(a.Dir, "php-fpm.log"), 10))
	}
}

// fpmMPM is the FPM stack's event MPM and proxy_fcgi settings.
func fpmMPM(a Apache, mods string) (mpm, conf string) {
	mpm = fmt.Sprintf(`LoadModule mpm_event_module %[1]s/mod_mpm_event.so
StartServers 1
ServerLimit 2
ThreadsPerChild 16
MinSpareThreads 4
MaxSpareThreads 32
MaxRequestWorkers 32`, mods)
	conf = fmt.Sprintf(`LoadModule authz_host_module %[1]s/mod_authz_host.so
LoadModule proxy_module      %[1]s/mod_proxy.so
LoadModule proxy_fcgi_module %[1]s/mod_proxy_fcgi.so
SetEnvIfNoCase ^Authorization$ "(.+)" HTTP_AUTHORIZATION=$1
<FilesMatch ".+\.ph(?:ar|p|tml)$">
    SetHandler "proxy:unix:%[2]s|fcgi://localhost"
</FilesMatch>
<Location "/fpm-status">
    SetHandler "proxy:unix:%[3]s|fcgi://localhost"
    Require local
</Location>`, mods, a.FPMSocket(), a.FPMStatusSocket())
	return mpm, conf
}

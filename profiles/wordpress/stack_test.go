package wordpress

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/varnishadm/varnishtest"
	"github.com/gearshift/gearshift/internal/testenv"
)

// need returns the path of each program, or fails the test in CI (CI set)
// and skips it elsewhere, naming the Debian packages to install.
func need(t testing.TB, progs ...string) map[string]string {
	t.Helper()
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
		testenv.Unavailable(t, "%s not found: run scripts/install-deps.sh (Debian packages wordpress, wordpress-theme-twentytwentyone, mariadb-server, php-mysql, apache2, libapache2-mod-php)", strings.Join(missing, ", "))
	}
	return paths
}

// searchable makes every directory from dir up to the temp root
// searchable, for Apache's and the VCL compiler's unprivileged users.
func searchable(t testing.TB, dir string) {
	t.Helper()
	for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(varnishtest.FreeAddr(t))
	n, _ := strconv.Atoi(p)
	return n
}

// daemon is a server process started by the test, stopped by pid.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startDaemon(t testing.TB, name, logFile string, args ...string) *daemon {
	t.Helper()
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own session: Apache signals its whole process group on SIGTERM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); log.Close(); close(d.done) }()
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) stop() {
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

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func lastLines(file string, n int) string {
	b, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond every 50ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// mariaDB is a private MariaDB server: its own data directory, socket and
// loopback port; root without a password.
type mariaDB struct {
	port   int
	socket string
	client string
}

func startMariaDB(t testing.TB, dir string, bin map[string]string) *mariaDB {
	t.Helper()
	data := filepath.Join(dir, "mysql")
	args := []string{bin["mariadb-install-db"], "--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}
	var userArgs []string
	if u, err := user.Current(); err == nil {
		userArgs = []string{"--user=" + u.Username}
	}
	out, err := exec.Command(args[0], append(args[1:], userArgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m := &mariaDB{port: freePort(t), socket: filepath.Join(dir, "mysql.sock"), client: bin["mariadb"]}
	errLog := filepath.Join(dir, "mariadb.err")
	d := startDaemon(t, "mariadbd", filepath.Join(dir, "mariadb.out"), append([]string{bin["mariadbd"], "--no-defaults",
		"--datadir=" + data, "--socket=" + m.socket, "--port=" + strconv.Itoa(m.port),
		"--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "mariadb.pid"),
		"--log-error=" + errLog, "--skip-log-bin", "--skip-name-resolve",
		"--innodb-buffer-pool-size=32M", "--performance-schema=OFF"}, userArgs...)...)
	if !waitFor(30*time.Second, func() bool { _, err := m.query("SELECT 1"); return err == nil || d.exited() }) || d.exited() {
		t.Fatalf("mariadbd did not start:\n%s", lastLines(errLog, 10))
	}
	if _, err := m.query("CREATE DATABASE wordpress"); err != nil {
		t.Fatal(err)
	}
	return m
}

// query runs SQL with the mariadb client and returns its tab-separated rows.
func (m *mariaDB) query(sql string) (string, error) {
	out, err := exec.Command(m.client, "--no-defaults", "-S", m.socket, "-u", "root", "-N", "-B", "-e", sql).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadb %q: %v: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// site is Debian's WordPress, installed in dir: the package's tree linked
// (or copied) in, with a wp-config.php of its own, so nothing is written
// to /etc or /usr/share.
type site struct {
	root    string
	url     string // http://127.0.0.1:<varnish port>, the site's address
	db      *mariaDB
	posts   map[string]int // gear -> post ID
	postURL map[string]string
	secret  string // the password-protected post's URL
}

const (
	adminUser     = "admin"
	postPassword  = "opensesame"
	secretContent = "The secret content of the protected post."
)

func installWordPress(t testing.TB, dir, siteURL, adminPass string, db *mariaDB, bin map[string]string) *site {
	t.Helper()
	root := filepath.Join(dir, "wordpress")
	// Hard links when /tmp and /usr share a file system (instant), a copy
	// otherwise: PHP resolves symbolic links, which would lead WordPress
	// back to the package's own wp-config.php.
	if out, err := exec.Command("cp", "-al", "/usr/share/wordpress", root).CombinedOutput(); err != nil {
		os.RemoveAll(root)
		if out, err := exec.Command("cp", "-a", "/usr/share/wordpress", root).CombinedOutput(); err != nil {
			t.Fatalf("copy /usr/share/wordpress: %v\n%s", err, out)
		}
		_ = out
	}
	// Never write through a hard link: remove, then create.
	for _, f := range []string{"wp-config.php", ".htaccess"} {
		if err := os.Remove(filepath.Join(root, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	keys := ""
	for _, k := range []string{"AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY", "AUTH_SALT", "SECURE_AUTH_SALT", "LOGGED_IN_SALT", "NONCE_SALT"} {
		keys += fmt.Sprintf("define('%s', '%s');\n", k, randomHex(t, 32))
	}
	config := fmt.Sprintf(`<?php
define('DB_NAME', 'wordpress');
define('DB_USER', 'root');
define('DB_PASSWORD', '');
define('DB_HOST', '127.0.0.1:%d');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
%s$table_prefix = 'wp_';
define('WP_HOME', '%s');
define('WP_SITEURL', '%s');
define('WP_CONTENT_DIR', __DIR__ . '/wp-content');
define('DISABLE_WP_CRON', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_HTTP_BLOCK_EXTERNAL', true);
if (!defined('ABSPATH')) define('ABSPATH', __DIR__ . '/');
require_once ABSPATH . 'wp-settings.php';
`, db.port, keys, siteURL, siteURL)
	writeFile(t, filepath.Join(root, "wp-config.php"), config)
	// No mail leaves the test.
	writeFile(t, filepath.Join(root, "wp-content", "mu-plugins", "gearshift-test.php"), `<?php
function wp_mail() { return true; }
`)

	install := fmt.Sprintf(`<?php
$_SERVER['HTTP_HOST'] = %[1]q;
$_SERVER['REQUEST_URI'] = '/';
define('WP_INSTALLING', true);
require %[2]q;
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
function wp_new_blog_notification() {}
$r = wp_install('gearshift test site', %[3]q, 'admin@example.invalid', false, '', %[4]q);
if (is_wp_error($r)) { fwrite(STDERR, $r->get_error_message()); exit(1); }
switch_theme('twentytwentyone');
update_option('permalink_structure', '/%%postname%%/');
update_option('comment_moderation', 1);      // visitors' comments wait for approval
update_option('comment_previously_approved', 0);
update_option('comments_notify', 0);
update_option('moderation_notify', 0);
update_option('show_comments_cookies_opt_in', 1);
flush_rewrite_rules(false);
$ids = array();
foreach (array('light', 'moderate', 'heavy') as $g) {
	$ids[$g] = wp_insert_post(array('post_title' => "Post for $g", 'post_name' => "post-$g",
		'post_content' => "The body of the $g post.", 'post_status' => 'publish', 'post_author' => 1,
		'comment_status' => 'open'), true);
}
$ids['secret'] = wp_insert_post(array('post_title' => 'Members only', 'post_name' => 'members-only',
	'post_content' => %[5]q, 'post_status' => 'publish', 'post_author' => 1,
	'post_password' => %[6]q), true);
echo json_encode($ids);
`, strings.TrimPrefix(siteURL, "http://"), filepath.Join(root, "wp-load.php"), adminUser, adminPass, secretContent, postPassword)
	script := filepath.Join(dir, "install.php")
	writeFile(t, script, install)
	out, err := exec.Command(bin["php"], script).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("installing WordPress: %v\n%s\n%s", err, out, stderr)
	}
	var ids map[string]int
	if err := json.Unmarshal(out[strings.LastIndex(string(out), "{"):], &ids); err != nil {
		t.Fatalf("installing WordPress: %v in %q", err, out)
	}
	s := &site{root: root, url: siteURL, db: db, posts: ids, postURL: map[string]string{}}
	for _, g := range []string{"light", "moderate", "heavy"} {
		s.postURL[g] = "/post-" + g + "/"
	}
	s.secret = "/members-only/"
	return s
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startApache serves the site with mod_php and mod_rewrite (WordPress's
// pretty permalinks), and the shipped mod_remoteip snippet.
func startApache(t testing.TB, dir, root string, port int, bin map[string]string) {
	t.Helper()
	mods := "/usr/lib/apache2/modules"
	php, _ := filepath.Glob(filepath.Join(mods, "libphp*.so"))
	if len(php) == 0 {
		need(t, filepath.Join(mods, "libphp8.2.so"))
	}
	snippet, err := filepath.Abs(filepath.Join("..", "..", "scripts", "wordpress", "remoteip.conf"))
	if err != nil {
		t.Fatal(err)
	}
	users := ""
	if os.Geteuid() == 0 {
		users = "User www-data\nGroup www-data"
	}
	phpLog := filepath.Join(dir, "php-error.log")
	writeFile(t, phpLog, "")
	os.Chmod(phpLog, 0o666)
	conf := fmt.Sprintf(`ServerRoot %[1]q
ServerName 127.0.0.1
Listen 127.0.0.1:%[2]d
PidFile %[1]s/apache.pid
DefaultRuntimeDir %[1]s
Mutex file:%[1]s default
ErrorLog %[1]s/apache-error.log
LogLevel warn
%[3]s
LoadModule mpm_prefork_module %[4]s/mod_mpm_prefork.so
LoadModule authz_core_module  %[4]s/mod_authz_core.so
LoadModule mime_module        %[4]s/mod_mime.so
LoadModule dir_module         %[4]s/mod_dir.so
LoadModule rewrite_module     %[4]s/mod_rewrite.so
LoadModule remoteip_module    %[4]s/mod_remoteip.so
LoadModule php_module         %[5]s
StartServers 4
MinSpareServers 2
MaxSpareServers 8
MaxRequestWorkers 16
TypesConfig /etc/mime.types
DocumentRoot %[6]q
DirectoryIndex index.php
LogFormat "%%a %%h \"%%r\" %%>s" visitor
CustomLog %[1]s/apache-access.log visitor
Include %[7]q
<Directory />
    AllowOverride None
    Require all denied
</Directory>
<Directory %[6]q>
    Options FollowSymLinks
    Require all granted
    RewriteEngine On
    RewriteBase /
    RewriteRule ^index\.php$ - [L]
    RewriteCond %%{REQUEST_FILENAME} !-f
    RewriteCond %%{REQUEST_FILENAME} !-d
    RewriteRule . /index.php [L]
</Directory>
<FilesMatch "\.php$">
    SetHandler application/x-httpd-php
</FilesMatch>
php_admin_flag  display_errors Off
php_admin_value error_log %[8]q
`, dir, port, users, mods, php[0], root, snippet, phpLog)
	file := filepath.Join(dir, "apache.conf")
	writeFile(t, file, conf)
	if out, err := exec.Command(bin["apache2"], "-f", file, "-t").CombinedOutput(); err != nil {
		t.Fatalf("apache2 -t: %v\n%s", err, out)
	}
	d := startDaemon(t, "apache2", filepath.Join(dir, "apache.out"), bin["apache2"], "-f", file, "-DFOREGROUND")
	url := fmt.Sprintf("http://127.0.0.1:%d/wp-includes/css/buttons.min.css", port)
	if !waitFor(20*time.Second, func() bool {
		r, err := http.Get(url)
		if err == nil {
			r.Body.Close()
		}
		return (err == nil && r.StatusCode == 200) || d.exited()
	}) || d.exited() {
		t.Fatalf("apache did not answer %s:\n%s", url, lastLines(filepath.Join(dir, "apache-error.log"), 10))
	}
}

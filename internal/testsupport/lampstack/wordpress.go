package lampstack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WordPressPackages are the Debian packages a WordPress stack needs, for
// Need's message.
const WordPressPackages = "wordpress, wordpress-theme-twentytwentyone, mariadb-server, php-mysql, apache2, libapache2-mod-php"

// WordPressPrograms are the programs and files StartWordPress needs in its
// bin map (see Need).
var WordPressPrograms = append(append([]string{"php", "/usr/share/wordpress/wp-settings.php",
	"/usr/share/wordpress/wp-content/themes/twentytwentyone/style.css"}, MariaDBPrograms...), ApachePrograms...)

// WordPressOptions shape the site StartWordPress installs.
type WordPressOptions struct {
	Posts       int      // published posts, /post-1/ … /post-N/, besides WordPress's "Hello world!"
	Subscribers []string // user names, each with the site's password and the subscriber role
	Stack       Stack    // how Apache runs PHP: ModPHP (the zero value) or FPM
}

// WordPress is Debian's WordPress installed under a test's temp dir: the
// package's tree linked (or copied) in with a wp-config.php of its own, so
// nothing is written to /etc or /usr/share, on a private MariaDB, served by
// a private Apache (mod_php, or PHP-FPM: WordPressOptions.Stack) and
// pretty permalinks.
type WordPress struct {
	Root     string   // the site's tree, Apache's DocumentRoot
	URL      string   // WP_HOME: where visitors reach the site (a Varnish in front of Apache)
	Password string   // the admin's and every subscriber's password
	Posts    []string // the posts' paths, /post-1/ …
	DB       *MariaDB //
	Apache   Apache   // Apache's settings, for StopApache and StartApache again
	Backend  string   // Apache's address, host:port
	bin      map[string]string
}

// StartWordPress starts MariaDB, installs WordPress with WordPress's own
// wp_install() for visitors at siteURL (http://host:port of the Varnish in
// front of it), and starts Apache on a free loopback port; both stop when
// the test ends. bin maps WordPressPrograms to their paths.
func StartWordPress(tb testing.TB, dir, siteURL string, opt WordPressOptions, bin map[string]string) *WordPress {
	tb.Helper()
	Searchable(tb, dir)
	db := StartMariaDB(tb, dir, bin)
	if _, err := db.Query("CREATE DATABASE wordpress"); err != nil {
		tb.Fatal(err)
	}
	wp := &WordPress{URL: siteURL, Password: RandomHex(tb, 12), DB: db, bin: bin}
	wp.install(tb, dir, opt)
	port := FreePort(tb)
	wp.Backend = "127.0.0.1:" + strconv.Itoa(port)
	wp.Apache = Apache{Dir: dir, Root: wp.Root, Port: port, Stack: opt.Stack, Probe: "/wp-includes/css/buttons.min.css",
		Directory: `    RewriteEngine On
    RewriteBase /
    RewriteRule ^index\.php$ - [L]
    RewriteCond %{REQUEST_FILENAME} !-f
    RewriteCond %{REQUEST_FILENAME} !-d
    RewriteRule . /index.php [L]`}
	StartApache(tb, wp.Apache, bin)
	return wp
}

func (wp *WordPress) install(tb testing.TB, dir string, opt WordPressOptions) {
	tb.Helper()
	wp.Root = filepath.Join(dir, "wordpress")
	CopyWordPress(tb, wp.Root, wp.DB.Port, wp.URL)
	wp.Posts = installSite(tb, dir, wp.Root, strings.TrimPrefix(wp.URL, "http://"), wp.URL, wp.Password, opt, wp.bin["php"])
}

// installSite installs, with WordPress's own wp_install(), the site of
// the tree at root that answers for host (the Host header, which Debian's
// wp-config.php picks a site's config by), its siteurl and home siteURL,
// with the posts and subscribers of opt; it returns the posts' paths.
func installSite(tb testing.TB, dir, root, host, siteURL, password string, opt WordPressOptions, php string) []string {
	tb.Helper()
	users, _ := json.Marshal(opt.Subscribers)
	script := filepath.Join(dir, "install.php")
	WriteFile(tb, script, fmt.Sprintf(`<?php
$_SERVER['HTTP_HOST'] = %[1]q;
$_SERVER['REQUEST_URI'] = '/';
define('WP_INSTALLING', true);
require %[2]q;
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
function wp_new_blog_notification() {}
$r = wp_install('gearshift test site', 'admin', 'admin@example.invalid', false, '', %[3]q);
if (is_wp_error($r)) { fwrite(STDERR, $r->get_error_message()); exit(1); }
// The address a visitor of the web installer would have given.
update_option('siteurl', %[6]q);
update_option('home', %[6]q);
wp_update_user(array('ID' => $r['user_id'], 'user_url' => %[6]q));
switch_theme('twentytwentyone');
update_option('permalink_structure', '/%%postname%%/');
update_option('comments_notify', 0);
update_option('moderation_notify', 0);
flush_rewrite_rules(false);
$body = str_repeat("<!-- wp:paragraph --><p>A paragraph of the kind a blog post has: a few sentences about the day's subject, long enough that the page weighs what a real one does.</p><!-- /wp:paragraph -->\n", 6);
for ($i = 1; $i <= %[4]d; $i++) {
	$id = wp_insert_post(array('post_title' => "Post number $i", 'post_name' => "post-$i",
		'post_content' => $body, 'post_status' => 'publish', 'post_author' => 1,
		'comment_status' => 'open'), true);
	if (is_wp_error($id)) { fwrite(STDERR, $id->get_error_message()); exit(1); }
	wp_insert_comment(array('comment_post_ID' => $id, 'comment_author' => 'A reader',
		'comment_content' => "A reader's comment on post $i.", 'comment_approved' => 1));
}
foreach (json_decode(%[5]q) as $u) {
	$id = wp_insert_user(array('user_login' => $u, 'user_pass' => %[3]q, 'role' => 'subscriber',
		'user_email' => "$u@example.invalid"));
	if (is_wp_error($id)) { fwrite(STDERR, $id->get_error_message()); exit(1); }
}
echo "installed\n";
`, host, filepath.Join(root, "wp-load.php"), password, opt.Posts, string(users), siteURL))
	out, err := exec.Command(php, script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "installed") {
		tb.Fatalf("installing WordPress for %s: %v\n%s", host, err, out)
	}
	var posts []string
	for i := 1; i <= opt.Posts; i++ {
		posts = append(posts, fmt.Sprintf("/post-%d/", i))
	}
	return posts
}

// StopApache stops the Apache StartApache started with a (SIGTERM through
// its pid file: every worker ends at once, as in a crash of the site) and
// returns once its port refuses connections. StartApache(tb, a, bin)
// starts it again.
func StopApache(tb testing.TB, a Apache) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(a.Dir, "apache.pid"))
	if err != nil {
		tb.Fatalf("apache's pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		tb.Fatalf("apache's pid file holds %q", raw)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		tb.Fatalf("stop apache (pid %d): %v", pid, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(a.Port)
	if !WaitFor(30*time.Second, func() bool {
		c, err := (&http.Client{Timeout: time.Second}).Get("http://" + addr + a.Probe)
		if err == nil {
			c.Body.Close()
		}
		return err != nil && syscall.Kill(pid, 0) != nil
	}) {
		tb.Fatalf("apache (pid %d) still answers on %s 30 s after SIGTERM", pid, addr)
	}
}

// Login logs b in to WordPress as user with password and returns the
// Cookie header a browser then sends on the site's pages (the
// wordpress_logged_in_* cookie among them).
func Login(b *Browser, user, password string) string {
	b.T.Helper()
	b.Get("/wp-login.php") // sets wordpress_test_cookie
	p := b.Post("/wp-login.php", url.Values{"log": {user}, "pwd": {password}, "wp-submit": {"Log In"},
		"redirect_to": {b.Base + "/wp-admin/"}, "testcookie": {"1"}})
	cookie := b.CookieHeader("/")
	if p.Status != http.StatusOK || !strings.Contains(cookie, "wordpress_logged_in_") {
		b.T.Fatalf("login as %s: status %d at %s, cookies %q:\n%.300s", user, p.Status, p.URL, cookie, p.Body)
	}
	return cookie
}

// LineCounter counts the lines appended to a file since it was made, as
// an access log grows, reading only what is new at each Count.
type LineCounter struct {
	f     *os.File
	lines int
	buf   []byte
}

// NewLineCounter starts counting at the end of file as it is now.
func NewLineCounter(tb testing.TB, file string) *LineCounter {
	tb.Helper()
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		tb.Fatal(err)
	}
	return &LineCounter{f: f, buf: make([]byte, 64<<10)}
}

// Count returns the lines appended since NewLineCounter.
func (c *LineCounter) Count() int {
	for {
		n, err := c.f.Read(c.buf)
		for _, b := range c.buf[:n] {
			if b == '\n' {
				c.lines++
			}
		}
		if n == 0 || err != nil {
			return c.lines
		}
	}
}

// CopyWordPress puts a copy of Debian's WordPress at root, configured for
// the database on 127.0.0.1:dbPort and the site's address siteURL, and
// unable to send mail; the install is the caller's.
func CopyWordPress(tb testing.TB, root string, dbPort int, siteURL string) {
	tb.Helper()
	copyTree(tb, root)
	WriteFile(tb, filepath.Join(root, "wp-config.php"), fmt.Sprintf(`<?php
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
`, dbPort, secretKeys(tb), siteURL, siteURL))
}

// copyTree puts a copy of Debian's WordPress tree at root, without its
// wp-config.php, and unable to send mail.
func copyTree(tb testing.TB, root string) {
	tb.Helper()
	// Hard links when /tmp and /usr share a file system (instant), a copy
	// otherwise: PHP resolves symbolic links, which would lead WordPress
	// back to the package's own wp-config.php.
	if err := exec.Command("cp", "-al", "/usr/share/wordpress", root).Run(); err != nil {
		os.RemoveAll(root)
		if out, err := exec.Command("cp", "-a", "/usr/share/wordpress", root).CombinedOutput(); err != nil {
			tb.Fatalf("copy /usr/share/wordpress: %v\n%s", err, out)
		}
	}
	// Never write through a hard link: remove, then create.
	for _, f := range []string{"wp-config.php", ".htaccess"} {
		if err := os.Remove(filepath.Join(root, f)); err != nil && !os.IsNotExist(err) {
			tb.Fatal(err)
		}
	}
	// No mail leaves the test.
	WriteFile(tb, filepath.Join(root, "wp-content", "mu-plugins", "gearshift-test.php"), "<?php\nfunction wp_mail() { return true; }\n")
}

// secretKeys are the define lines of WordPress's keys and salts, fresh.
func secretKeys(tb testing.TB) string {
	keys := ""
	for _, k := range []string{"AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY", "AUTH_SALT", "SECURE_AUTH_SALT", "LOGGED_IN_SALT", "NONCE_SALT"} {
		keys += fmt.Sprintf("define('%s', '%s');\n", k, RandomHex(tb, 32))
	}
	return keys
}

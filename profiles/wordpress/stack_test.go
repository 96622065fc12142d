package wordpress

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// need returns the path of each program, or fails the test in CI (CI set)
// and skips it elsewhere, naming the Debian packages to install for php.
func need(t testing.TB, php lampstack.Stack, progs ...string) map[string]string {
	t.Helper()
	return lampstack.Need(t, "wordpress, wordpress-theme-twentytwentyone, mariadb-server, php-mysql, "+php.Packages(), progs...)
}

// site is Debian's WordPress, installed in dir: the package's tree linked
// (or copied) in, with a wp-config.php of its own, so nothing is written
// to /etc or /usr/share.
type site struct {
	root    string
	url     string // http://127.0.0.1:<varnish port>, the site's address
	db      *lampstack.MariaDB
	posts   map[string]int // gear -> post ID
	postURL map[string]string
	secret  string // the password-protected post's URL
}

const (
	adminUser     = "admin"
	postPassword  = "opensesame"
	secretContent = "The secret content of the protected post."
)

func installWordPress(t testing.TB, dir, siteURL, adminPass string, db *lampstack.MariaDB, bin map[string]string) *site {
	t.Helper()
	root := filepath.Join(dir, "wordpress")
	lampstack.CopyWordPress(t, root, db.Port, siteURL)

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
	lampstack.WriteFile(t, script, install)
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

// startApache serves the site with PHP as php says (mod_php, or PHP-FPM
// behind the event MPM) and mod_rewrite (WordPress's pretty permalinks),
// and the shipped mod_remoteip snippet.
func startApache(t testing.TB, php lampstack.Stack, dir, root string, port int, bin map[string]string) {
	t.Helper()
	lampstack.StartApache(t, lampstack.Apache{Dir: dir, Root: root, Port: port, Stack: php, Probe: "/wp-includes/css/buttons.min.css",
		Directory: `    RewriteEngine On
    RewriteBase /
    RewriteRule ^index\.php$ - [L]
    RewriteCond %{REQUEST_FILENAME} !-f
    RewriteCond %{REQUEST_FILENAME} !-d
    RewriteRule . /index.php [L]`}, bin)
}

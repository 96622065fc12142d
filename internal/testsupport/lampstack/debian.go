package lampstack

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// DebianSite is one site of a Debian WordPress: the host it answers for,
// whose /etc/wordpress/config-HOST.php holds its settings, and its
// address.
type DebianSite struct {
	Host string // the Host it is served for: example.org
	URL  string // its siteurl and home (Settings, General): https://example.org
	// HTTPSOnly: Apache answers a request that did not come over https
	// with a 301 to https (HTTPSRedirect), as on a site served on https
	// alone.
	HTTPSOnly bool
}

// DebianWordPress is Debian's WordPress set up as the package means it:
// one tree serving every host, the package's own wp-config.php picking
// each host's config-HOST.php, each site in tables of its own in one
// database, behind one private Apache and MariaDB. Nothing is written to
// /etc: the package's wp-config.php is copied with /etc/wordpress
// replaced by Etc.
type DebianWordPress struct {
	Root     string              // the tree, Apache's DocumentRoot
	Etc      string              // stands for /etc/wordpress: config-HOST.php of each site
	Password string              // every site's admin's password
	Posts    map[string][]string // a site's host → its posts' paths, /post-1/ …
	DB       *MariaDB            //
	Apache   Apache              //
	Backend  string              // Apache's address, host:port
}

// StartDebianWordPress starts MariaDB, installs each of sites with
// WordPress's own wp_install() (opt's posts and subscribers, opt's
// Stack), and starts Apache on a free loopback port; all stop when the
// test ends. bin maps WordPressPrograms to their paths.
func StartDebianWordPress(tb testing.TB, dir string, sites []DebianSite, opt WordPressOptions, bin map[string]string) *DebianWordPress {
	tb.Helper()
	Searchable(tb, dir)
	db := StartMariaDB(tb, dir, bin)
	if _, err := db.Query("CREATE DATABASE wordpress"); err != nil {
		tb.Fatal(err)
	}
	wp := &DebianWordPress{Root: filepath.Join(dir, "wordpress"), Etc: filepath.Join(dir, "etc-wordpress"),
		Password: RandomHex(tb, 12), Posts: map[string][]string{}, DB: db}
	copyTree(tb, wp.Root)
	WriteFile(tb, filepath.Join(wp.Root, "wp-config.php"), debianConfig(tb, wp.Etc))
	var redirects strings.Builder
	for i, s := range sites {
		WriteFile(tb, filepath.Join(wp.Etc, "config-"+s.Host+".php"), wp.hostConfig(tb, i, s))
		wp.Posts[s.Host] = installSite(tb, dir, wp.Root, s.Host, s.URL, wp.Password, opt, bin["php"])
		if s.HTTPSOnly {
			redirects.WriteString(HTTPSRedirect(s.Host))
		}
	}
	port := FreePort(tb)
	wp.Backend = "127.0.0.1:" + strconv.Itoa(port)
	wp.Apache = Apache{Dir: dir, Root: wp.Root, Port: port, Stack: opt.Stack, Probe: "/wp-includes/css/buttons.min.css",
		Conf: redirects.String(),
		Directory: `    RewriteEngine On
    RewriteBase /
    RewriteRule ^index\.php$ - [L]
    RewriteCond %{REQUEST_FILENAME} !-f
    RewriteCond %{REQUEST_FILENAME} !-d
    RewriteRule . /index.php [L]`}
	StartApache(tb, wp.Apache, bin)
	return wp
}

// debianConfig is the package's /usr/share/wordpress/wp-config.php with
// its host files read from etc instead of /etc/wordpress. Its own lines
// do the rest, among them HTTPS=on for X-Forwarded-Proto: https.
func debianConfig(tb testing.TB, etc string) string {
	tb.Helper()
	raw, err := os.ReadFile("/usr/share/wordpress/wp-config.php")
	if err != nil {
		tb.Fatalf("Debian's wp-config.php: %v", err)
	}
	text := string(raw)
	if n := strings.Count(text, "'/etc/wordpress/"); n < 3 {
		tb.Fatalf("Debian's wp-config.php names '/etc/wordpress/ %d times, want its three host files:\n%s", n, text)
	}
	return strings.ReplaceAll(text, "'/etc/wordpress/", "'"+etc+"/")
}

// hostConfig is the i-th site's config-HOST.php: what its admin writes
// in /etc/wordpress on Debian (the database, the keys, where the tree is).
// Its address is in its options, siteurl and home, set at install.
func (wp *DebianWordPress) hostConfig(tb testing.TB, i int, s DebianSite) string {
	tb.Helper()
	return fmt.Sprintf(`<?php
define('DB_NAME', 'wordpress');
define('DB_USER', 'root');
define('DB_PASSWORD', '');
define('DB_HOST', '127.0.0.1:%d');
$table_prefix = 'wp%d_';
%sdefine('ABSPATH', %q);
define('WP_CONTENT_DIR', %q);
define('DISABLE_WP_CRON', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_HTTP_BLOCK_EXTERNAL', true);
`, wp.DB.Port, i, secretKeys(tb), wp.Root+"/", filepath.Join(wp.Root, "wp-content"))
}

// HTTPSRedirect is the Apache config of an https-only site behind
// Varnish: a request for host that did not come over https (Varnish sends
// X-Forwarded-Proto: https for those alone) gets a 301 to the same URL on
// https.
func HTTPSRedirect(host string) string {
	return fmt.Sprintf(`RewriteEngine On
RewriteCond %%{HTTP_HOST} ^%s(:[0-9]+)?$ [NC]
RewriteCond %%{HTTP:X-Forwarded-Proto} !=https
RewriteRule ^ https://%s%%{REQUEST_URI} [R=301,L]
`, regexp.QuoteMeta(host), host)
}

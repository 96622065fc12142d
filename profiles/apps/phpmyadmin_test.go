package apps

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gearshift/gearshift/internal/testsupport/lampstack"
)

// pma is Debian's phpMyAdmin with cookie authentication against a private
// MariaDB: the package's tree linked in, with a vendor_config.php of its
// own that points at a config, temp and cache dir in the test's dir, so
// nothing is read from /etc/phpmyadmin or written to /var/lib/phpmyadmin.
type pma struct {
	*stack
	db    *lampstack.MariaDB
	users map[string]string // MariaDB user -> password; each owns <user>_db
}

const pmaPath = "/phpmyadmin/"

func startPhpMyAdmin(t testing.TB, php lampstack.Stack) *pma {
	t.Helper()
	bin := lampstack.Need(t, "phpmyadmin, mariadb-server, php-mysql, php-mbstring, php-xml, "+php.Packages(),
		append(append([]string{"/usr/share/phpmyadmin/index.php", "/usr/share/phpmyadmin/libraries/vendor_config.php"},
			lampstack.MariaDBPrograms...), lampstack.ApachePrograms...)...)
	st := startVarnish(t)
	start := time.Now()
	p := &pma{stack: st, db: lampstack.StartMariaDB(t, st.dir, bin), users: map[string]string{}}
	for _, u := range []string{"alice", "bob"} {
		p.users[u] = lampstack.RandomHex(t, 12)
		for _, sql := range []string{
			fmt.Sprintf("CREATE DATABASE %s_db", u),
			fmt.Sprintf("CREATE TABLE %s_db.notes (id INT PRIMARY KEY AUTO_INCREMENT, note VARCHAR(200))", u),
			fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", u, p.users[u]),
			fmt.Sprintf("GRANT ALL ON %s_db.* TO '%s'@'%%'", u, u),
		} {
			if _, err := p.db.Query(sql); err != nil {
				t.Fatal(err)
			}
		}
	}

	root := filepath.Join(st.dir, "phpmyadmin")
	// Hard links when /tmp and /usr share a file system, a copy
	// otherwise; PHP resolves symbolic links, which would lead back to the
	// package's own vendor_config.php.
	if out, err := exec.Command("cp", "-al", "/usr/share/phpmyadmin", root).CombinedOutput(); err != nil {
		os.RemoveAll(root)
		if out, err := exec.Command("cp", "-a", "/usr/share/phpmyadmin", root).CombinedOutput(); err != nil {
			t.Fatalf("copy /usr/share/phpmyadmin: %v\n%s", err, out)
		}
		_ = out
	}
	etc := filepath.Join(st.dir, "phpmyadmin-etc")
	for _, d := range []string{"tmp", "cache"} {
		if err := os.MkdirAll(filepath.Join(etc, d), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(etc, d), 0o777) // written by Apache's user
	}
	vendor := filepath.Join(root, "libraries", "vendor_config.php")
	text, err := os.ReadFile(vendor)
	if err != nil {
		t.Fatal(err)
	}
	// Never write through a hard link: remove, then create.
	if err := os.Remove(vendor); err != nil {
		t.Fatal(err)
	}
	conf := string(text)
	for from, to := range map[string]string{
		`'/etc/phpmyadmin/config.inc.php'`: fmt.Sprintf("%q", filepath.Join(etc, "config.inc.php")),
		`'/var/lib/phpmyadmin/tmp/'`:       fmt.Sprintf("%q", filepath.Join(etc, "tmp")+"/"),
		`ROOT_PATH . 'libraries' . DIRECTORY_SEPARATOR . 'cache' . DIRECTORY_SEPARATOR`: fmt.Sprintf("%q", filepath.Join(etc, "cache")+"/"),
	} {
		if !strings.Contains(conf, from) {
			t.Fatalf("%s no longer sets %s: the test needs a new way to point phpMyAdmin at its own config", vendor, from)
		}
		conf = strings.Replace(conf, from, to, 1)
	}
	lampstack.WriteFile(t, vendor, conf)
	lampstack.WriteFile(t, filepath.Join(etc, "config.inc.php"), fmt.Sprintf(`<?php
$cfg['blowfish_secret'] = %q;
$cfg['Servers'][1]['auth_type'] = 'cookie';
$cfg['Servers'][1]['host'] = '127.0.0.1';
$cfg['Servers'][1]['port'] = '%d';
$cfg['Servers'][1]['connect_type'] = 'tcp';
$cfg['TempDir'] = %q;
$cfg['SendErrorReports'] = 'never';
`, lampstack.RandomHex(t, 16), p.db.Port, filepath.Join(etc, "tmp")))

	port := lampstack.FreePort(t)
	docroot := filepath.Join(st.dir, "htdocs")
	lampstack.WriteFile(t, filepath.Join(docroot, "index.html"), "<p>phpMyAdmin is at /phpmyadmin/</p>\n")
	// As Debian's /etc/phpmyadmin/apache.conf has it.
	lampstack.StartApache(t, lampstack.Apache{Dir: st.dir, Root: docroot, Port: port, Stack: php, Probe: pmaPath + "favicon.ico",
		Conf: fmt.Sprintf(`Alias /phpmyadmin %[1]q
<Directory %[1]q>
    Options SymLinksIfOwnerMatch
    DirectoryIndex index.php
    Require all granted
</Directory>
<Directory %[2]q>
    Require all denied
</Directory>
<Directory %[3]q>
    Require all denied
</Directory>`, root, filepath.Join(root, "templates"), filepath.Join(root, "libraries"))}, bin)
	t.Logf("MariaDB, phpMyAdmin and Apache (%s) up in %s", php, time.Since(start).Round(time.Millisecond))
	st.loadDefaults(t, port)
	return p
}

var pmaServerUser = regexp.MustCompile(`User:\s*([A-Za-z0-9_]+)@`)

// pmaUser is the user a phpMyAdmin page was made for, by the databases
// its navigation lists (each user sees only their own): "" for the login
// form, "?" when the page says neither.
func (p *pma) pmaUser(page lampstack.Page) string {
	if strings.Contains(page.Body, `id="login_form"`) {
		return ""
	}
	var seen []string
	for u := range p.users {
		if strings.Contains(page.Body, u+"_db") {
			seen = append(seen, u)
		}
	}
	if len(seen) != 1 {
		return "?"
	}
	return seen[0]
}

func (p *pma) wantUser(t *testing.T, what string, page lampstack.Page, user string) {
	t.Helper()
	if got := p.pmaUser(page); got != user {
		t.Errorf("%s: a page for %q (status %d, X-Cache %s, at %s), want one for %q", what, got, page.Status, page.XCache(), page.URL, user)
	}
}

var pmaTokenRE = regexp.MustCompile(`name="token" value="([0-9a-zA-Z]+)"`)

// pmaToken is the CSRF token on a phpMyAdmin page.
func pmaToken(t *testing.T, page lampstack.Page) string {
	t.Helper()
	m := pmaTokenRE.FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no token on the page at %s:\n%.300s", page.URL, page.Body)
	}
	return m[1]
}

// TestPhpMyAdmin runs Debian's phpMyAdmin, on mod_php and on PHP-FPM,
// through each gear of the default profiles: two MariaDB users, each with a browser of their own,
// log in with the real form and its token, browse their database, write
// to it, change a preference and log out; the login form is never shared,
// and no page is ever another user's.
func TestPhpMyAdmin(t *testing.T) {
	lampstack.EachStack(t, func(t *testing.T, php lampstack.Stack) {
		p := startPhpMyAdmin(t, php)
		p.eachGear(t, func(t *testing.T, gear string, i int) { testPmaGear(t, p, gear, i) })
	})
}

func testPmaGear(t *testing.T, p *pma, gear string, i int) {
	// Its images, scripts and style sheets are static objects, cached in
	// every gear; its pages are all no-store, cached in none.
	p.checkRepeat(t, visitor(i, 1), pmaPath+"themes/pmahomme/img/logo_right.png", true)
	p.checkRepeat(t, visitor(i, 1), pmaPath+"js/dist/console.js", true)
	p.checkRepeat(t, visitor(i, 1), pmaPath, false)

	// The login form starts a session: a cookie and a token of its own for
	// every visitor.
	anon := p.browser(t, visitor(i, 1))
	alice, bob := p.browser(t, visitor(i, 2)), p.browser(t, visitor(i, 3))
	forms := map[*lampstack.Browser]form{}
	for _, b := range []*lampstack.Browser{anon, alice, bob} {
		page := b.Get(pmaPath)
		if page.XCache() == "HIT" {
			t.Errorf("login form for %s: X-Cache HIT, a shared copy", b.IP)
		}
		forms[b] = mustForm(t, "login form", page.Body, `login_form`)
		if cookieValue(b, pmaPath, "phpMyAdmin") == "" {
			t.Errorf("login form for %s set no phpMyAdmin session cookie (cookies: %v)", b.IP, cookieNames(b, pmaPath))
		}
	}
	if a, b := forms[alice].fields.Get("token"), forms[bob].fields.Get("token"); a == "" || a == b {
		t.Errorf("two visitors got login tokens %q and %q, want two different ones", a, b)
	}
	if a, b := cookieValue(alice, pmaPath, "phpMyAdmin"), cookieValue(bob, pmaPath, "phpMyAdmin"); a == b {
		t.Errorf("two visitors got the same session cookie %s", a)
	}
	for b, name := range map[*lampstack.Browser]string{alice: "alice", bob: "bob"} {
		f := forms[b]
		f.fields.Set("pma_username", name)
		f.fields.Set("pma_password", p.users[name])
		page := b.Post(pmaPath+f.action, f.fields)
		m := pmaServerUser.FindStringSubmatch(page.Body)
		if page.Status != http.StatusOK || m == nil || m[1] != name {
			t.Fatalf("%s's login: status %d at %s (X-Cache %s), user %v:\n%.400s", name, page.Status, page.URL, page.XCache(), m, page.Body)
		}
	}
	users := map[*lampstack.Browser]string{anon: "", alice: "alice", bob: "bob"}

	// Every page, twice, in turn: each is the right user's.
	for _, path := range []string{"index.php?route=/", "index.php?route=/database/structure&db=%s_db",
		"index.php?route=/sql&db=%s_db&table=notes&pos=0", "index.php?route=/preferences/main-panel"} {
		for n := 0; n < 2; n++ {
			for _, b := range []*lampstack.Browser{alice, bob, anon} {
				u := path
				if strings.Contains(u, "%s") {
					u = fmt.Sprintf(path, users[b])
					if users[b] == "" {
						u = fmt.Sprintf(path, "alice") // a visitor tries Alice's
					}
				}
				p.wantUser(t, fmt.Sprintf("GET %s #%d", u, n+1), b.Do(http.MethodGet, pmaPath+u, nil, nil), users[b])
			}
		}
	}

	// A write shows at once to its author: a row in her table, through
	// phpMyAdmin's SQL form.
	note := fmt.Sprintf("A note by Alice in %s %s", gear, lampstack.RandomHex(t, 4))
	sql := mustForm(t, "SQL form", alice.Get(pmaPath+"index.php?route=/database/sql&db=alice_db").Body, `sqlqueryform`)
	sql.fields.Set("sql_query", fmt.Sprintf("INSERT INTO notes (note) VALUES ('%s')", note))
	sql.fields.Set("SQL", "Go")
	if page := alice.Post(pmaPath+sql.action, sql.fields); page.Status != http.StatusOK || !strings.Contains(page.Body, "1 row inserted") {
		t.Errorf("Alice's INSERT: status %d at %s (X-Cache %s), no \"1 row inserted\":\n%.400s", page.Status, page.URL, page.XCache(), page.Body)
	}
	browse := pmaPath + "index.php?route=/sql&db=alice_db&table=notes&pos=0"
	if page := alice.Get(browse); !strings.Contains(page.Body, note) {
		t.Errorf("Alice does not see her note at once (X-Cache %s)", page.XCache())
	}
	if got, err := p.db.Query("SELECT COUNT(*) FROM alice_db.notes WHERE note = '" + note + "'"); err != nil || got != "1" {
		t.Errorf("rows with Alice's note in MariaDB: %q (%v), want 1", got, err)
	}

	// A preference (rows per page, kept in the session): Alice's changes,
	// Bob's does not.
	prefsPath := pmaPath + "index.php?route=/preferences/main-panel"
	prefs := mustForm(t, "preferences", alice.Get(prefsPath).Body, `preferences&#x2F;main-panel`)
	prefs.fields.Set("MaxRows", "50")
	prefs.fields.Set("submit_save", "Apply")
	if page := alice.Post(pmaPath+prefs.action, prefs.fields); page.Status != http.StatusOK {
		t.Errorf("saving Alice's preferences: status %d at %s", page.Status, page.URL)
	}
	for b, want := range map[*lampstack.Browser]string{alice: "50", bob: "25"} {
		f := mustForm(t, users[b]+"'s preferences", b.Get(prefsPath).Body, `preferences&#x2F;main-panel`)
		if got := f.fields.Get("MaxRows"); got != want {
			t.Errorf("%s's rows per page: %q, want %s", users[b], got, want)
		}
	}

	// Logout (a POST with the token) ends the session: the old cookies,
	// replayed, get the login form.
	old := alice.CookieHeader(pmaPath)
	token := pmaToken(t, alice.Get(pmaPath+"index.php?route=/"))
	if page := alice.Post(pmaPath+"index.php?route=/logout", url.Values{"token": {token}}); p.pmaUser(page) != "" {
		t.Errorf("logout: a page for %q at %s", p.pmaUser(page), page.URL)
	}
	replay := p.browser(t, alice.IP)
	for _, path := range []string{"index.php?route=/", browse[len(pmaPath):]} {
		p.wantUser(t, "after logout, GET "+path, alice.Do(http.MethodGet, pmaPath+path, nil, nil), "")
		p.wantUser(t, "replaying the old cookies, GET "+path, replay.Do(http.MethodGet, pmaPath+path, nil, map[string]string{"Cookie": old}), "")
	}
	p.wantUser(t, "Bob after Alice's logout", bob.Get(pmaPath+"index.php?route=/"), "bob")
}

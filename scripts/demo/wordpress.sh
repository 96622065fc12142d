# shellcheck shell=bash
# The demo's WordPress site (DEMO_SITE=wordpress): Debian's wordpress package
# with its own MariaDB, in the stack's directory. Sourced by scripts/demo.sh
# after lib.sh; call wp_site after stack_init and before stack_apache.
#
# Nothing in /etc or /usr/share is written: the package's tree is hard-linked
# (or copied) into $STACK_DIR/site with a wp-config.php of its own, since
# Debian's reads /etc/wordpress/config-<host>.php.

WP_USERS="alice user1 user2 user3 user4 user5 user6 user7 user8 user9"

wp_need() {
	need_cmds mariadbd mariadb-install-db mariadb php
	[ -f /usr/share/wordpress/wp-settings.php ] && [ -d /usr/share/wordpress/wp-content/themes/twentytwentyone ] ||
		die "WordPress not found: run 'make deps' (Debian packages wordpress, wordpress-theme-twentytwentyone, mariadb-server, php-mysql)"
}

wp_mariadb() {
	local user=() i
	[ "$(id -u)" -ne 0 ] || user=(--user=root)
	DB_PORT=$(free_port)
	mariadb-install-db --no-defaults --datadir="$STACK_DIR/mysql" --auth-root-authentication-method=normal \
		--skip-test-db "${user[@]}" >"$STACK_DIR/mariadb-install.log" 2>&1 ||
		die "mariadb-install-db failed: $(tail -3 "$STACK_DIR/mariadb-install.log")"
	setsid mariadbd --no-defaults --datadir="$STACK_DIR/mysql" --socket="$STACK_DIR/mysql.sock" \
		--port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$STACK_DIR/mariadb.pid" \
		--log-error="$STACK_DIR/mariadb.err" --skip-log-bin --skip-name-resolve \
		--innodb-buffer-pool-size=64M --performance-schema=OFF "${user[@]}" >/dev/null 2>&1 &
	DB_PID=$!
	STACK_PIDS+=("$DB_PID")
	for i in $(seq 1 300); do
		alive "$DB_PID" || die "mariadbd exited: $(tail -3 "$STACK_DIR/mariadb.err")"
		mariadb --no-defaults -S "$STACK_DIR/mysql.sock" -u root -e 'CREATE DATABASE wordpress' 2>/dev/null && return 0
		sleep 0.1
	done
	die "mariadbd did not start within 30 s: $(tail -3 "$STACK_DIR/mariadb.err")"
}

wp_site() {
	wp_need
	wp_mariadb
	local site=$STACK_DIR/site k keys=""
	rm -rf "$site"
	# PHP resolves symbolic links, which would lead back to Debian's config.
	cp -al /usr/share/wordpress "$site" 2>/dev/null || { rm -rf "$site"; cp -a /usr/share/wordpress "$site"; }
	rm -f "$site/wp-config.php" "$site/.htaccess" # never write through a hard link
	for k in AUTH_KEY SECURE_AUTH_KEY LOGGED_IN_KEY NONCE_KEY AUTH_SALT SECURE_AUTH_SALT LOGGED_IN_SALT NONCE_SALT; do
		keys+="define('$k', '$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')');"$'\n'
	done
	cat >"$site/wp-config.php" <<EOF
<?php
define('DB_NAME', 'wordpress');
define('DB_USER', 'root');
define('DB_PASSWORD', '');
define('DB_HOST', '127.0.0.1:$DB_PORT');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
${keys}\$table_prefix = 'wp_';
// Over https (hitch, then Varnish's X-Forwarded-Proto: docs/frontdoor.md),
// the demo's site is at its https address; over http at its http one.
if (isset(\$_SERVER['HTTP_X_FORWARDED_PROTO']) && \$_SERVER['HTTP_X_FORWARDED_PROTO'] === 'https') {
    \$_SERVER['HTTPS'] = 'on';
}
define('WP_HOME', empty(\$_SERVER['HTTPS']) ? '$SITE' : '${SITE_HTTPS:-$SITE}');
define('WP_SITEURL', WP_HOME);
define('WP_CONTENT_DIR', __DIR__ . '/wp-content');
define('DISABLE_WP_CRON', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_HTTP_BLOCK_EXTERNAL', true);
if (!defined('ABSPATH')) define('ABSPATH', __DIR__ . '/');
require_once ABSPATH . 'wp-settings.php';
EOF
	mkdir -p "$site/wp-content/mu-plugins"
	echo '<?php function wp_mail() { return true; }' >"$site/wp-content/mu-plugins/demo-no-mail.php"
	WP_PASS=$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')
	cat >"$STACK_DIR/wp-install.php" <<EOF
<?php
\$_SERVER['HTTP_HOST'] = '${SITE#http://}';
\$_SERVER['REQUEST_URI'] = '/';
define('WP_INSTALLING', true);
require '$site/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
function wp_new_blog_notification() {}
\$r = wp_install('gearshift demo', 'admin', 'admin@example.invalid', false, '', '$WP_PASS');
if (is_wp_error(\$r)) { fwrite(STDERR, \$r->get_error_message() . "\n"); exit(1); }
switch_theme('twentytwentyone');
update_option('permalink_structure', '/%postname%/');
flush_rewrite_rules(false);
foreach (explode(' ', '$WP_USERS') as \$u) {
	wp_insert_user(array('user_login' => \$u, 'user_pass' => '$WP_PASS', 'role' => 'subscriber',
		'user_email' => "\$u@example.invalid"));
}
EOF
	php "$STACK_DIR/wp-install.php" >"$STACK_DIR/wp-install.log" 2>&1 ||
		die "installing WordPress failed: $(tail -3 "$STACK_DIR/wp-install.log")"
	cat >"$STACK_DIR/wordpress.conf" <<EOF
# WordPress's pretty permalinks, and the visitor's address from Varnish.
LoadModule rewrite_module  /usr/lib/apache2/modules/mod_rewrite.so
LoadModule remoteip_module /usr/lib/apache2/modules/mod_remoteip.so
Include $ROOT/scripts/wordpress/remoteip.conf
<Directory "$site">
    Options FollowSymLinks
    RewriteEngine On
    RewriteBase /
    RewriteRule ^index\.php$ - [L]
    RewriteCond %{REQUEST_FILENAME} !-f
    RewriteCond %{REQUEST_FILENAME} !-d
    RewriteRule . /index.php [L]
</Directory>
EOF
	STACK_SITE_LINES="Include $STACK_DIR/wordpress.conf"
}

# wp_login NAME prints the value of NAME's wordpress_logged_in_* cookie,
# logging in through wp-login.php on Apache directly.
wp_login() {
	local jar=$STACK_DIR/jar-$1
	curl -s -o /dev/null -c "$jar" --max-time 10 "$ORIGIN/wp-login.php"
	curl -s -o /dev/null -b "$jar" -c "$jar" --max-time 20 \
		--data-urlencode "log=$1" --data-urlencode "pwd=$WP_PASS" -d testcookie=1 "$ORIGIN/wp-login.php"
	awk '$6 ~ /^wordpress_logged_in_/ { print $7 }' "$jar"
}

# wp_cookie_name prints the name of WordPress's logged-in cookie.
wp_cookie_name() {
	awk '$6 ~ /^wordpress_logged_in_/ { print $6; exit }' "$STACK_DIR/jar-alice"
}

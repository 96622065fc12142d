// Package apps holds integration tests of gearshift's default profiles in
// front of real PHP applications other than WordPress: Debian's MediaWiki
// and phpMyAdmin, and a small site that starts a PHP session on every
// page, each on Apache with mod_php (and a private MariaDB), driven through
// every gear by browsers with cookie jars. It has no code of its own.
package apps

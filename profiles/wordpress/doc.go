// Package wordpress holds the integration test of gearshift's profiles in
// front of a real WordPress (Debian's wordpress, Apache with mod_php and
// MariaDB, and Debian's hitch in front for https, all started on loopback
// by the test). It has no code of its own.
package wordpress

package profiles

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FallbackMaxConnections is backend.max_connections when the web
// server's config says nothing: Debian's MaxRequestWorkers for Apache's
// prefork and event MPMs.
const FallbackMaxConnections = 150

// MaxConnectionsFiles are where DetectMaxConnections looks, in order:
// Apache's enabled MPM (MaxRequestWorkers, or MaxClients before 2.4),
// then PHP-FPM's pools (pm.max_children, summed over the pools).
var MaxConnectionsFiles = []string{
	"/etc/apache2/mods-enabled/mpm_*.conf",
	"/etc/httpd/conf.modules.d/*mpm*.conf",
	"/etc/php/*/fpm/pool.d/*.conf",
}

// DetectMaxConnections returns what the backend takes at once, read from
// the web server's config (MaxConnectionsFiles), and the file it came
// from; FallbackMaxConnections and "" when none says.
func DetectMaxConnections() (int, string) {
	for _, pattern := range MaxConnectionsFiles {
		files, _ := filepath.Glob(pattern)
		sum, from := 0, ""
		for _, f := range files {
			n := readLimit(f)
			if n <= 0 {
				continue
			}
			if !strings.Contains(pattern, "fpm") {
				return n, f
			}
			sum += n
			from = f
		}
		if sum > 0 {
			return sum, from
		}
	}
	return FallbackMaxConnections, ""
}

// readLimit returns the last MaxRequestWorkers, MaxClients or
// pm.max_children set in file, or 0.
func readLimit(file string) int {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, val, ok := strings.Cut(strings.Replace(line, "=", " ", 1), " ")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "maxrequestworkers", "maxclients", "pm.max_children":
			if v, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && v > 0 {
				n = v
			}
		}
	}
	return n
}

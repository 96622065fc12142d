package lampstack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// SessionSiteFiles is the session-on-every-page site (profiles/apps'
// fixture): every page starts a PHP session with PHP's defaults (a
// PHPSESSID cookie, no-store), its forms carry a token of the session.
const SessionSiteFiles = "profiles/apps/testdata/sessionsite"

// StartSessionSite serves SessionSiteFiles with Apache and PHP as php
// says on a free loopback port, its data (users alice and bob, with
// random passwords, returned) under dir; each page costs workMS
// milliseconds of CPU (0: what the site itself costs, next to nothing).
func StartSessionSite(tb testing.TB, php Stack, dir string, workMS int, bin map[string]string) (Apache, map[string]string) {
	tb.Helper()
	root := filepath.Join(dir, "site")
	files, err := filepath.Glob(filepath.Join(RepoFile(tb, SessionSiteFiles), "*"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("%s: no files (%v)", SessionSiteFiles, err)
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		WriteFile(tb, filepath.Join(root, filepath.Base(f)), string(text))
	}
	data := filepath.Join(dir, "site-data")
	users := map[string]string{"alice": RandomHex(tb, 12), "bob": RandomHex(tb, 12)}
	b, _ := json.Marshal(users)
	WriteFile(tb, filepath.Join(data, "users.json"), string(b))
	os.Chmod(data, 0o777) // written by Apache's user
	a := Apache{Dir: dir, Root: root, Port: FreePort(tb), Stack: php, Probe: "/",
		Conf: fmt.Sprintf("SetEnv SITE_DATA %s\nSetEnv SITE_WORK_MS %d", data, workMS)}
	StartApache(tb, a, bin)
	return a, users
}

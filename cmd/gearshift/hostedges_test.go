package main

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gearshift/gearshift/controller/pidfile"
	"github.com/gearshift/gearshift/internal/testsupport/configtest"
)

// config check says when the admin secret can be read by others, and the
// config is still OK.
func TestConfigCheckWarnsReadableSecret(t *testing.T) {
	path, dir := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\n")
	secret := filepath.Join(dir, "secret")
	if code, stdout, stderr := runMain(t, "config", "check", "--config", path); code != 0 || stderr != "" || !strings.HasPrefix(stdout, "config OK") {
		t.Fatalf("a 0600 secret: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	os.Chmod(secret, 0o644)
	code, stdout, stderr := runMain(t, "config", "check", "--config", path)
	want := "gearshift: warning: varnish.targets[0].secret_file: " + secret + " can be read by its group or by every user (mode 0644), and the secret gives control of Varnish: chmod 0600 " + secret + "\n"
	if code != 0 || !strings.HasPrefix(stdout, "config OK") || stderr != want {
		t.Errorf("a 0644 secret: exit %d, stdout %q, stderr %q; want exit 0 and\n%s", code, stdout, stderr, want)
	}
}

// webhook.sh gives curl the webhook's URL, a secret, on stdin and never on
// its command line, which every user sees in ps; the URL may come from a
// file, so that the hook's own command line does not show it either.
func TestWebhookURLNotOnCommandLine(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "curl.log")
	fake := "#!/bin/sh\n{ printf 'argv:'; printf ' [%s]' \"$@\"; printf '\\nstdin:'; cat; } >" + record + "\n"
	if err := os.WriteFile(filepath.Join(dir, "curl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	const url = `https://hooks.example.com/T000/B000/s3cr3t"\x`
	urlFile := filepath.Join(dir, "webhook.url")
	os.WriteFile(urlFile, []byte(url+"\n"), 0o600)
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "hooks", "webhook.sh"))
	for _, arg := range []string{url, urlFile} {
		os.Remove(record)
		cmd := exec.Command("/bin/sh", script, arg)
		cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "GEARSHIFT_FROM=light", "GEARSHIFT_TO=heavy", "GEARSHIFT_MODE=auto", "GEARSHIFT_REASON=load"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("webhook.sh %s: %v\n%s", arg, err, out)
		}
		b, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		argv, stdin, _ := strings.Cut(string(b), "\nstdin:")
		if strings.Contains(argv, "s3cr3t") || !strings.Contains(argv, "[--config] [-]") || !strings.Contains(argv, `"to":"heavy"`) {
			t.Errorf("webhook.sh %s: curl's %s", arg, argv)
		}
		if want := `url = "https://hooks.example.com/T000/B000/s3cr3t\"\\x"` + "\n"; stdin != want {
			t.Errorf("webhook.sh %s: curl's stdin %q, want %q", arg, stdin, want)
		}
	}
}

// logrotate's postrotate signals through the pid file's lock: a stale pid
// file naming a live process of someone else (a recycled pid) leaves that
// process alone, where `kill -USR1 $(cat pid)` killed it.
func TestLogsReopenSignalsOnlyTheLockedDaemon(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "logrotate", "gearshift"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "gearshift logs --reopen") || strings.Contains(s, "kill ") {
		t.Errorf("the logrotate config does not reopen through gearshift logs --reopen:\n%s", s)
	}

	dir := t.TempDir()
	pidPath := filepath.Join(dir, "gearshift.pid")
	path, _ := configtest.File(t, "varnish: { targets: [ { admin: 127.0.0.1:6082, secret_file: $DIR/secret } ] }\npid_file: "+pidPath+"\n")
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- other.Wait() }()
	os.WriteFile(pidPath, []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644)
	code, stdout, stderr := runMain(t, "logs", "--reopen", "--config", path)
	if code != 0 || !strings.Contains(stdout, "gearshift is not running") {
		t.Errorf("a stale pid file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	select {
	case err := <-exited:
		t.Fatalf("the process a stale pid file named was signalled: %v", err)
	case <-time.After(200 * time.Millisecond):
	}

	// The daemon (here, this process) holds the lock: it gets SIGUSR1.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	pf, err := pidfile.Write(pidPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Remove()
	code, stdout, stderr = runMain(t, "logs", "--reopen", "--config", path)
	if code != 0 || stdout != "asked gearshift (pid "+strconv.Itoa(os.Getpid())+") to reopen its log file\n" {
		t.Errorf("a running daemon: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	select {
	case <-usr1:
	case <-time.After(5 * time.Second):
		t.Error("the daemon holding the pid file got no SIGUSR1")
	}
}

package hooks

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gearshift/gearshift/internal/testsupport/testenv"
)

// hangScript is the controller's test hook that hangs, with a child, until
// killed.
func hangScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "testdata", "hooks", "hang.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHookRunnerOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		argv   []string
		msg    string
		fields map[string]any
	}{
		{"failing", []string{"/bin/sh", "-c", `echo "to $GEARSHIFT_TO ($GEARSHIFT_MODE)" >&2; exit 3`}, "hook failed",
			map[string]any{"exit_code": int64(3), "output": "to heavy (forced)"}},
		{"missing", []string{"/nonexistent/hook"}, "hook could not run", nil},
		{"chatty", []string{"/bin/sh", "-c", "head -c 10000 /dev/zero | tr '\\0' x"}, "hook ran",
			map[string]any{"output": strings.Repeat("x", maxOutput) + "\n… (5904 more bytes)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			h := New(zap.New(core))
			h.Enqueue(Event{Argv: tc.argv, Timeout: time.Minute, From: "light", To: "heavy", Reason: "r", Mode: "forced"})
			h.Close(time.Minute)
			entries := logs.FilterMessage(tc.msg).All()
			if len(entries) != 1 {
				t.Fatalf("log = %v, want one %q", logs.All(), tc.msg)
			}
			f := entries[0].ContextMap()
			for k, v := range tc.fields {
				if f[k] != v {
					t.Errorf("%s = %#v, want %#v", k, f[k], v)
				}
			}
		})
	}

	t.Run("stopping kills a running hook", func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		h := New(zap.New(core))
		dir := t.TempDir()
		h.Enqueue(Event{Argv: []string{hangScript(t), dir}, Timeout: time.Hour, From: "light", To: "heavy"})
		testenv.Eventually(t, "the hook to start", time.Minute, func() bool { _, err := os.Stat(filepath.Join(dir, "pids")); return err == nil })
		h.Close(0)
		if logs.FilterMessage("hook killed: the daemon is stopping").Len() != 1 {
			t.Errorf("log = %v", logs.All())
		}
		h.Enqueue(Event{Argv: []string{"/bin/true"}, Timeout: time.Minute})
		if logs.FilterMessage("hook ran").Len() != 0 {
			t.Error("a hook ran after close")
		}
	})
}

// The shipped webhook example posts the change as JSON, quotes and all.
func TestWebhookExampleHook(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl not found: run scripts/install-deps.sh")
	}
	got := make(chan map[string]string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&body) != nil {
			w.WriteHeader(http.StatusBadRequest)
		}
		got <- body
	}))
	defer srv.Close()
	core, logs := observer.New(zapcore.DebugLevel)
	h := New(zap.New(core))
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "hooks", "webhook.sh"))
	reason := `forced by operator "until" \auto`
	summary := "incident 20261201T030000Z: 4m above light, heavy after 9s, 184k requests served, 9.1k reached the backend, about 121k spared"
	h.Enqueue(Event{Argv: []string{script, srv.URL}, Timeout: time.Minute, From: "light", To: "heavy", Reason: reason, Mode: "forced",
		Env: []string{EnvIncident + "=20261201T030000Z"}})
	h.Enqueue(Event{Argv: []string{script, srv.URL}, Timeout: time.Minute, From: "heavy", To: "light", Reason: "stay rule", Mode: "auto",
		Env: []string{EnvIncident + "=20261201T030000Z", EnvSummary + "=" + summary}})
	h.Close(time.Minute)
	if logs.FilterMessage("hook ran").Len() != 2 {
		t.Fatalf("webhook.sh did not succeed: %v", logs.All())
	}
	body := <-got
	if body["from"] != "light" || body["to"] != "heavy" || body["mode"] != "forced" || body["reason"] != reason ||
		body["incident"] != "20261201T030000Z" || body["summary"] != "" ||
		!strings.Contains(body["text"], "light -> heavy (forced): "+reason) {
		t.Errorf("webhook body = %v", body)
	}
	body = <-got
	if body["summary"] != summary || !strings.HasSuffix(body["text"], ": back in light, "+summary) {
		t.Errorf("webhook body on the way back = %v", body)
	}
}

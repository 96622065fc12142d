package jsonfmt

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, map[string]any{"reason": "load_per_cpu >= 1.50 && <x>", "n": 1}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"n\": 1,\n  \"reason\": \"load_per_cpu >= 1.50 && <x>\"\n}\n"; b.String() != want {
		t.Errorf("Write = %q, want %q", b.String(), want)
	}
	if err := Write(&b, func() {}); err == nil || !strings.HasPrefix(err.Error(), "write json: ") {
		t.Errorf("Write of a func = %v", err)
	}
	if err := Write(failing{}, 1); !errors.Is(err, errFull) {
		t.Errorf("Write to a full writer = %v", err)
	}
}

var errFull = errors.New("disk full")

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errFull }

package varnishadm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gearshift/gearshift/internal/testsupport/varnishtest"
)

func TestQuoteArg(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain word", "vcl.use", "vcl.use"},
		{"empty", "", `""`},
		{"space", "a b", `a\x20b`},
		{"double quote", `say "hi"`, `say\x20\"hi\"`},
		{"backslash", `a\b`, `a\\b`},
		{"backslash before n stays literal", `\n`, `\\n`},
		{"newline", "a\nb", `a\nb`},
		{"carriage return", "a\rb", `a\rb`},
		{"tab", "a\tb", `a\tb`},
		{"control byte", "a\x01b\x1f", `a\x01b\x1f`},
		{"DEL", "\x7f", `\x7f`},
		{"vertical tab and form feed", "\v\f", `\x0b\x0c`},
		{"byte 0xff", "\xff", `\xff`},
		{"non-ASCII is sent byte by byte", "é✓", `\xc3\xa9\xe2\x9c\x93`},
		{"hex digit after an escape", "\x01f", `\x01f`},
		{"here-document marker alone", "<<", "<<"},
		{"leading dash", "-j", "-j"},
		{"hash and comma are plain", "#a,b", "#a,b"},
		{"VCL", "vcl 4.1;\nbackend default none;\n", `vcl\x204.1;\nbackend\x20default\x20none;\n`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Quote(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if back, err := decodeWord(got); err != nil || back != tc.in {
				t.Fatalf("decodeWord(%s) = %q, %v; want %q", got, back, err, tc.in)
			}
		})
	}
}

func TestQuoteArgRejectsNUL(t *testing.T) {
	if got, err := Quote("a\x00b"); err == nil {
		t.Fatalf("Quote with NUL = %s, want an error", got)
	}
}

// TestQuoteArgRoundTrip checks random byte strings: every encoded word is
// one word of printable ASCII without space or quote, and decodes back.
func TestQuoteArgRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		b := make([]byte, rng.Intn(40))
		for j := range b {
			b[j] = byte(1 + rng.Intn(255))
		}
		in := string(b)
		got, err := Quote(in)
		if err != nil {
			t.Fatal(err)
		}
		if in != "" {
			for k := 0; k < len(got); k++ {
				if c := got[k]; c <= ' ' || c >= 0x7f || (c == '"' && (k == 0 || got[k-1] != '\\')) {
					t.Fatalf("Quote(%q) = %q: byte %q at %d", in, got, c, k)
				}
			}
		}
		back, err := decodeWord(got)
		if err != nil || back != in {
			t.Fatalf("round trip of %q via %s = %q, %v", in, got, back, err)
		}
	}
}

// decodeWord decodes one CLI word the way vav.c does for the subset of the
// syntax Quote emits: a bare word with backslash escapes, or "".
func decodeWord(w string) (string, error) {
	if w == `""` {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c == ' ' || c == '"' || c == '\n' || c == '\r' {
			return "", errors.New("unescaped " + strconv.QuoteRune(rune(c)))
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(w) {
			return "", errors.New("dangling backslash")
		}
		i++
		switch w[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '"', '\\':
			b.WriteByte(w[i])
		case 'x':
			if i+2 >= len(w) {
				return "", errors.New("short \\x")
			}
			v, err := strconv.ParseUint(w[i+1:i+3], 16, 8)
			if err != nil {
				return "", err
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			return "", errors.New("unknown escape")
		}
	}
	return b.String(), nil
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"one word", []string{"ping"}, "ping\n", ""},
		{"inline", []string{"vcl.inline", "n", "vcl 4.1;\n", "warm"}, `vcl.inline n vcl\x204.1;\n warm` + "\n", ""},
		{"empty args", []string{"x", "", ""}, `x "" ""` + "\n", ""},
		{"no command", nil, "", "empty command"},
		{"empty command", []string{""}, "", "empty command"},
		{"NUL", []string{"vcl.inline", "n", "a\x00"}, "", "argument 2: "},
		{"here-document", []string{"vcl.inline", "n", "<<", "warm"}, "", "here-document"},
		{"here-document marker last is harmless", []string{"vcl.use", "<<"}, `vcl.use <<` + "\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := commandLine(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("commandLine(%q) = %q, %v; want error containing %q", tc.args, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("commandLine(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
			}
		})
	}
}

func TestAuthResponse(t *testing.T) {
	// printf 'abcdefghijklmnopqrstuvwxyzabcdef\ns3cret\nabcdefghijklmnopqrstuvwxyzabcdef\n' | sha256sum
	const want = "62434a6780a5350d13f97c166072e5ac3a8b3408fcd01eadf579e15a166438b5"
	if got := authResponse("abcdefghijklmnopqrstuvwxyzabcdef", []byte("s3cret\n")); got != want {
		t.Fatalf("authResponse = %s, want %s", got, want)
	}
}

func TestParseChallenge(t *testing.T) {
	const ch = "abcdefghijklmnopqrstuvwxyzabcdef"
	if got, err := parseChallenge(ch + "\n\nAuthentication required.\n"); err != nil || got != ch {
		t.Fatalf("parseChallenge = %q, %v", got, err)
	}
	for _, bad := range []string{"", ch, ch + " ", "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEF\n", strings.Repeat("a", 31) + "\n\n"} {
		if _, err := parseChallenge(bad); !errors.Is(err, errProtocol) {
			t.Errorf("parseChallenge(%q) = %v, want a protocol error", bad, err)
		}
	}
}

func frame(status int, body string) string { return varnishtest.Frame(status, body) }

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantStatus int
		wantBody   string
		wantErr    string // substring; "" = success
		wantEOF    bool
	}{
		{"ok", frame(200, "PONG 1 1.0"), 200, "PONG 1 1.0", "", false},
		{"empty body", frame(200, ""), 200, "", "", false},
		{"truncated status", frame(201, "abc"), 201, "abc", "", false},
		{"error status", frame(106, "No VCL named x known\n"), 106, "No VCL named x known\n", "", false},
		{"body with newlines", frame(200, "a\n\nb\n"), 200, "a\n\nb\n", "", false},
		{"nothing at all", "", 0, "", "EOF", true},
		{"truncated header", "200 10 ", 0, "", "truncated header", false},
		{"no space after status", "2000 5      \nhello\n", 0, "", "malformed header", false},
		{"no newline after length", "200 5       xhello\n", 0, "", "malformed header", false},
		{"letters in status", "2x0 5       \nhello\n", 0, "", "bad status", false},
		{"status below 100", "099 5       \nhello\n", 0, "", "bad status", false},
		{"letters in length", "200 5x      \nhello\n", 0, "", "bad body length", false},
		{"negative length", "200 -5      \nhello\n", 0, "", "bad body length", false},
		{"blank length", "200         \nhello\n", 0, "", "bad body length", false},
		{"right-justified length", "200        5\nhello\n", 0, "", "bad body length", false},
		{"absurd length", "200 99999999\n", 0, "", "exceeds the limit", false},
		{"short body", "200 10      \nhello", 0, "", "connection closed after 5 of 10 body bytes", false},
		{"missing final newline", "200 5       \nhellox", 0, "", "not followed by a newline", false},
		{"body cut before final newline", "200 5       \nhello", 0, "", "connection closed", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, rd := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tc.in)},
				{"byte by byte", iotest.OneByteReader(strings.NewReader(tc.in))},
			} {
				status, body, err := readResponse(rd.r, MaxResponse)
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("%s: readResponse = %d %q %v, want error containing %q", rd.name, status, body, err, tc.wantErr)
					}
					if tc.wantEOF != (err == io.EOF) {
						t.Fatalf("%s: err = %#v, bare io.EOF wanted: %v", rd.name, err, tc.wantEOF)
					}
					if !tc.wantEOF && !errors.Is(err, errProtocol) {
						t.Fatalf("%s: err = %v, want a protocol error", rd.name, err)
					}
					continue
				}
				if err != nil || status != tc.wantStatus || body != tc.wantBody {
					t.Fatalf("%s: readResponse = %d %q %v, want %d %q", rd.name, status, body, err, tc.wantStatus, tc.wantBody)
				}
			}
		})
	}
}

func TestReadResponseSequence(t *testing.T) {
	r := strings.NewReader(frame(107, "x") + frame(200, "y"))
	for _, want := range []string{"x", "y"} {
		if _, body, err := readResponse(r, MaxResponse); err != nil || body != want {
			t.Fatalf("readResponse = %q, %v; want %q", body, err, want)
		}
	}
}

// FuzzReadResponse feeds arbitrary bytes to the frame reader: it must not
// panic, must agree with the header it accepted, and must not allocate
// beyond what the declared length (capped) allows.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		frame(200, "PONG 1 1.0"),
		frame(107, "abcdefghijklmnopqrstuvwxyzabcdef\n\nAuthentication required.\n"),
		frame(201, strings.Repeat("x", 100)),
		"200 99999999\n",
		"200 16777216\nabc",
		"200 1000000 \nabc", // within the limit: still no 1 MB up front
		"200 5       \nhel",
		"",
		"200",
		"-1  -1      \n\n",
	} {
		f.Add([]byte(s))
	}
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, in []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		status, body, err := readResponse(bytes.NewReader(in), limit)
		runtime.ReadMemStats(&after)
		declared := -1
		if len(in) >= headerLen {
			if _, n, perr := parseHeader(in[:headerLen]); perr == nil {
				declared = n
			}
		}
		if err == nil {
			if declared < 0 || len(body) != declared || status < 100 || status > 999 {
				t.Fatalf("accepted %q as %d %q (declared %d)", in, status, body, declared)
			}
			if len(in) < headerLen+declared+1 || in[headerLen+declared] != '\n' {
				t.Fatalf("accepted an incomplete frame %q", in)
			}
		}
		// Memory used is bounded by what was received (plus the string
		// copy), never by a large declared length alone.
		bound := uint64(3*len(in) + 64<<10 + 16<<10)
		if got := after.TotalAlloc - before.TotalAlloc; got > bound {
			t.Fatalf("allocated %d bytes for a %d-byte input (declared %d)", got, len(in), declared)
		}
	})
}

func TestParseVCLList(t *testing.T) {
	tests := []struct {
		file   string
		active string
		want   []VCL
	}{
		{"vcl.list-7.1-boot.json", "boot", []VCL{
			{Name: "boot", Status: "active", State: "auto", Temperature: "warm"},
		}},
		{"vcl.list-7.1-labels.json", "boot", []VCL{
			{Name: "boot", Status: "active", State: "auto", Temperature: "warm"},
			{Name: "x", Status: "available", State: "warm", Temperature: "warm", Labels: 1},
			{Name: "lab", Status: "available", State: "label", Temperature: "warm", LabelOf: "x"},
		}},
		// A label that the active VCL hands requests to with return (vcl(gearshift)).
		{"vcl.list-7.1-label-refs.json", "site", []VCL{
			{Name: "gs-a", Status: "available", State: "warm", Temperature: "warm", Labels: 1},
			{Name: "gearshift", Status: "available", State: "label", Temperature: "warm", LabelOf: "gs-a", LabelRefs: 1},
			{Name: "site", Status: "active", State: "auto", Temperature: "warm"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseVCLList(string(b))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d VCLs %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("VCL %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
			for _, v := range got {
				if v.Active() != (v.Name == tc.active) {
					t.Errorf("Active() = %v for %+v", v.Active(), v)
				}
				if v.IsLabel() != (v.LabelOf != "") {
					t.Errorf("IsLabel() = %v for %+v", v.IsLabel(), v)
				}
			}
		})
	}
}

func TestParseVCLListErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"active auto warm 0 boot",
		"[]",
		`[ "x", [], 1 ]`,
		`[ 2, ["vcl.list", "-j"], 1, {"status": "active"} ]`,
		`[ 2, ["vcl.list", "-j"], 1, {"status": "active", "name": "a", "busy": "x"} ]`,
		`[ 2, ["vcl.list", "-j"], 1, {"status": "active", "name": "a"}`, // cut by cli_limit
		`[ 2, ["vcl.list", "-j"], 1, {"status": "active", "name": "a"} ] ]`,
	} {
		if got, err := parseVCLList(in); err == nil {
			t.Errorf("parseVCLList(%q) = %+v, want an error", in, got)
		}
	}
}

// FuzzParseVCLList feeds arbitrary text to the vcl.list -j parser: it
// must not panic, and what it accepts has a name for every entry.
func FuzzParseVCLList(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "vcl.list-*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(`[ 2, ["vcl.list", "-j"], 1, {"status": "active", "name": "a"} ] ]`)
	f.Add(`[ 2, [], 1, {"name": "l", "state": "label", "label": {"name": "a", "refs": 1}} ]`)
	f.Fuzz(func(t *testing.T, in string) {
		vcls, err := parseVCLList(in)
		if err != nil {
			return
		}
		for _, v := range vcls {
			if v.Name == "" {
				t.Fatalf("accepted an entry without a name from %q", in)
			}
		}
	})
}

func TestParseChildState(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		wantErr        bool
	}{
		{"running", "Child in state running", "running", false},
		{"stopped, with a newline", "Child in state stopped\n", "stopped", false},
		{"passing state", "Child in state stopping", "stopping", false},
		{"empty", "", "", true},
		{"no state", "Child in state ", "", true},
		{"something else", "PONG 1700000000 1.0", "", true},
		{"more words", "Child in state running now", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseChildState(tc.in)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("parseChildState(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestRedactError(t *testing.T) {
	err := fmt.Errorf("load: %w", &CLIError{Status: 106, Text: "Message from VCC-compiler:\nif (req.http.X-Purge-Token != {\"s3cret-token\"})\n"})
	got := RedactError(err, "s3cret-token", "<purge token>")
	var ce *CLIError
	if !errors.As(got, &ce) || ce.Status != 106 || strings.Contains(got.Error(), "s3cret") || !strings.Contains(ce.Text, "<purge token>") {
		t.Errorf("RedactError = %v", got)
	}
	if other := errors.New("s3cret-token"); RedactError(other, "s3cret-token", "x") != other {
		t.Error("an error Varnish did not answer was changed")
	}
}

func TestChildLost(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&CLIError{Status: statusComms, Text: "CLI communication error (hdr)"}, true},
		{fmt.Errorf("use profile on 127.0.0.1:6082: %w", &CLIError{Status: statusComms, Text: "CLI communication error"}), true},
		{&CLIError{Status: 106, Text: "VCL compilation failed"}, false},
		{errors.New("CLI communication error"), false},
		{nil, false},
	} {
		if got := ChildLost(c.err); got != c.want {
			t.Errorf("ChildLost(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

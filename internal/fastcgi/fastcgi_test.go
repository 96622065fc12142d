package fastcgi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// record builds one record as an application would send it.
func record(typ byte, id uint16, content []byte, pad int) []byte {
	h := []byte{version1, typ, byte(id >> 8), byte(id), byte(len(content) >> 8), byte(len(content)), byte(pad), 0}
	return append(append(h, content...), make([]byte, pad)...)
}

func endRequest(appStatus uint32, protocolStatus byte) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, appStatus)
	b[4] = protocolStatus
	return record(typeEndRequest, requestID, b, 0)
}

func join(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestReadResponse(t *testing.T) {
	page := []byte("Content-type: application/json\r\n\r\n{\"pool\":\"www\"}")
	tests := []struct {
		name    string
		in      []byte
		max     int
		status  int
		body    string
		stderr  string
		wantErr string
	}{
		{name: "one stdout record", in: join(record(typeStdout, 1, page, 3), record(typeStdout, 1, nil, 0), endRequest(0, 0)),
			status: 200, body: `{"pool":"www"}`},
		{name: "split across records, with stderr", in: join(
			record(typeStdout, 1, page[:10], 6), record(typeStderr, 1, []byte("Primary script unknown"), 2),
			record(typeStdout, 1, page[10:], 0), endRequest(0, 0)),
			status: 200, body: `{"pool":"www"}`, stderr: "Primary script unknown"},
		{name: "a Status header", in: join(record(typeStdout, 1, []byte("Status: 404 Not Found\r\nContent-type: text/html\r\n\r\nFile not found.\n"), 0), endRequest(0, 0)),
			status: 404, body: "File not found.\n"},
		{name: "bad Status header", in: join(record(typeStdout, 1, []byte("Status: abc\r\n\r\n"), 0), endRequest(0, 0)),
			wantErr: `bad Status header "abc"`},
		{name: "not FastCGI", in: []byte("HTTP/1.1 200 OK\r\n\r\n"), wantErr: "not a FastCGI record (version 72)"},
		{name: "another request's record", in: join(record(typeStdout, 2, page, 0), endRequest(0, 0)), wantErr: "record for request 2, want 1"},
		{name: "truncated header", in: record(typeStdout, 1, page, 0)[:5], wantErr: "read record header"},
		{name: "truncated content", in: record(typeStdout, 1, page, 0)[:20], wantErr: "truncated"},
		{name: "truncated padding", in: record(typeStdout, 1, page, 7)[:8+len(page)+2], wantErr: "truncated"},
		{name: "closed before the end", in: record(typeStdout, 1, page, 0), wantErr: "connection closed before the end of the response"},
		{name: "nothing", in: nil, wantErr: "connection closed before the end"},
		{name: "too large", in: join(record(typeStdout, 1, page, 0), record(typeStdout, 1, page, 0), endRequest(0, 0)), max: len(page) + 10,
			wantErr: "response larger than the limit"},
		{name: "short END_REQUEST", in: record(typeEndRequest, 1, []byte{0, 0, 0}, 5), wantErr: "END_REQUEST of 3 bytes"},
		{name: "overloaded", in: endRequest(0, 2), wantErr: "request refused (protocol status 2: overloaded)"},
		{name: "unexpected type", in: record(typeParams, 1, nil, 0), wantErr: "unexpected record type 4"},
		{name: "empty response", in: endRequest(0, 0), wantErr: "empty response"},
		{name: "endless empty records", in: bytes.Repeat(record(typeStdout, 1, nil, 0), maxRecords+1), wantErr: "no END_REQUEST within"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			resp, err := ReadResponse(bytes.NewReader(tc.in), max)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReadResponse: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tc.status || string(resp.Body) != tc.body || resp.Stderr != tc.stderr {
				t.Errorf("ReadResponse = %d %q stderr %q; want %d %q stderr %q", resp.Status, resp.Body, resp.Stderr, tc.status, tc.body, tc.stderr)
			}
		})
	}
	if _, err := ReadResponse(bytes.NewReader(join(record(typeStdout, 1, page, 0), record(typeStdout, 1, page, 0), endRequest(0, 0))), len(page)+1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("too large: %v, want ErrTooLarge", err)
	}
}

// decodeRequest reads the records a client sent, as an application
// would: the role and the params.
func decodeRequest(tb testing.TB, r io.Reader) (role uint16, params map[string]string) {
	tb.Helper()
	params = map[string]string{}
	var p bytes.Buffer
	for {
		var h [headerLen]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			tb.Fatalf("read request: %v", err)
		}
		n := int(binary.BigEndian.Uint16(h[4:6]))
		content := make([]byte, n+int(h[6]))
		if _, err := io.ReadFull(r, content); err != nil {
			tb.Fatalf("read request: %v", err)
		}
		if (n+int(h[6]))%8 != 0 {
			tb.Errorf("record of type %d not padded to 8 bytes: %d", h[1], n+int(h[6]))
		}
		content = content[:n]
		switch h[1] {
		case typeBeginRequest:
			role = binary.BigEndian.Uint16(content)
			if content[2] != 0 {
				tb.Errorf("flags %d: the connection should not be kept", content[2])
			}
		case typeParams:
			p.Write(content)
		case typeStdin:
			readLen := func(b []byte) (int, []byte) {
				if b[0] < 128 {
					return int(b[0]), b[1:]
				}
				return int(binary.BigEndian.Uint32(b) &^ (1 << 31)), b[4:]
			}
			b := p.Bytes()
			for len(b) > 0 {
				var kl, vl int
				kl, b = readLen(b)
				vl, b = readLen(b)
				params[string(b[:kl])] = string(b[kl : kl+vl])
				b = b[kl+vl:]
			}
			return role, params
		}
	}
}

func TestDo(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "app.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	long := strings.Repeat("x", 70000) // past a record and the one-byte length
	got := make(chan map[string]string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		role, params := decodeRequest(t, c)
		if role != roleResponder {
			t.Errorf("role %d, want the responder's", role)
		}
		got <- params
		c.Write(join(record(typeStdout, 1, []byte("Content-type: text/plain\r\n\r\npong"), 4), endRequest(0, 0)))
	}()
	want := map[string]string{"SCRIPT_FILENAME": "/status", "QUERY_STRING": "json", "LONG": long, "EMPTY": ""}
	resp, err := Do(context.Background(), Request{Network: "unix", Address: sock, Params: want, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "pong" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("Do = %d %v %q", resp.Status, resp.Header, resp.Body)
	}
	params := <-got
	if len(params) != len(want) {
		t.Errorf("params %d, want %d", len(params), len(want))
	}
	for k, v := range want {
		if params[k] != v {
			t.Errorf("param %s = %.20q, want %.20q", k, params[k], v)
		}
	}
}

// An application that takes the request and never answers costs the
// timeout, not the poll.
func TestDoTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	_, err = Do(context.Background(), Request{Network: "tcp", Address: l.Addr().String(), Timeout: 200 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do: %v, want a deadline exceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Do took %s with a timeout of 200ms", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := Do(ctx, Request{Network: "tcp", Address: l.Addr().String()}); !errors.Is(err, context.Canceled) {
		t.Errorf("Do cancelled: %v, want context.Canceled", err)
	}
}

// FuzzReadResponse: whatever an application sends, the reader returns
// an answer within the limits or an error, and never panics.
func FuzzReadResponse(f *testing.F) {
	page := []byte("Content-type: application/json\r\n\r\n{\"pool\":\"www\"}")
	for _, seed := range [][]byte{
		join(record(typeStdout, 1, page, 3), record(typeStdout, 1, nil, 0), endRequest(0, 0)),
		join(record(typeStderr, 1, []byte("Primary script unknown"), 2), record(typeStdout, 1, []byte("Status: 404 Not Found\r\n\r\nFile not found.\n"), 0), endRequest(0, 0)),
		record(typeStdout, 1, page, 0)[:20],
		endRequest(0, 2),
		[]byte("HTTP/1.1 200 OK\r\n\r\n"),
		{},
	} {
		f.Add(seed)
	}
	const limit = 4 << 10
	f.Fuzz(func(t *testing.T, in []byte) {
		resp, err := ReadResponse(bytes.NewReader(in), limit)
		if err != nil {
			if resp != nil {
				t.Fatal("an error with a response")
			}
			return
		}
		if len(resp.Body) > limit || len(resp.Stderr) > maxStderr || resp.Status < 100 || resp.Status > 999 {
			t.Fatalf("answer out of bounds: status %d, %d bytes, stderr %d", resp.Status, len(resp.Body), len(resp.Stderr))
		}
	})
}

// Package fastcgi is the client side of one FastCGI request (the
// responder role): enough to ask PHP-FPM for a page such as its pool
// status straight over its socket, bounded in size and time.
package fastcgi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Record types and the responder role of the FastCGI 1.0 specification.
const (
	version1         = 1
	typeBeginRequest = 1
	typeEndRequest   = 3
	typeParams       = 4
	typeStdin        = 5
	typeStdout       = 6
	typeStderr       = 7
	roleResponder    = 1

	headerLen = 8
	requestID = 1

	// protocolStatus of an END_REQUEST: the request completed; the others
	// (cannot multiplex, overloaded, unknown role) are refusals.
	requestComplete = 0
)

// ErrTooLarge is the error of a response whose output passes the limit.
var ErrTooLarge = errors.New("response larger than the limit")

// Response is what the application answered: the status of its CGI
// headers (200 when it sent none), the headers and the body.
type Response struct {
	Status int
	Header textproto.MIMEHeader
	Body   []byte
	Stderr string // what it wrote to FCGI_STDERR, cut at 4 KiB
	// AppStatus is the exit status of the END_REQUEST record.
	AppStatus uint32
}

// Request is one request to a FastCGI application.
type Request struct {
	Network string            // "unix" or "tcp"
	Address string            // a socket path, or host:port
	Params  map[string]string // the CGI environment (SCRIPT_FILENAME, QUERY_STRING, …)
	Timeout time.Duration     // for the whole exchange, connection included; <= 0: none beyond ctx
	MaxBody int               // bytes of FCGI_STDOUT accepted; <= 0: 1 MiB
}

const (
	defaultMaxBody = 1 << 20
	maxStderr      = 4 << 10
	// maxRecords bounds the records of one response: a peer sending empty
	// records forever would otherwise never pass the size limit.
	maxRecords = 1 << 16
)

// Do sends the request (BEGIN_REQUEST, PARAMS, an empty STDIN) on a new
// connection and reads the answer up to END_REQUEST. The connection is not
// kept: the application may close it (FCGI_KEEP_CONN is not set).
func Do(ctx context.Context, r Request) (*Response, error) {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, r.Network, r.Address)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	// A cancelled ctx without a deadline still ends a blocked read.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	req, err := encodeRequest(r.Params)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(req); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("send request: %w", err))
	}
	max := r.MaxBody
	if max <= 0 {
		max = defaultMaxBody
	}
	resp, err := ReadResponse(bufio.NewReader(conn), max)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	return resp, nil
}

// ctxErr prefers the context's reason (a timeout) to the I/O error it
// caused: the connection's deadline is the context's, and may pass first.
func ctxErr(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

// encodeRequest is the request's records: BEGIN_REQUEST, the params in
// records of at most 65535 bytes, an empty PARAMS, an empty STDIN.
func encodeRequest(params map[string]string) ([]byte, error) {
	var b bytes.Buffer
	writeRecord(&b, typeBeginRequest, []byte{0, roleResponder, 0, 0, 0, 0, 0, 0})
	var p bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		if len(k) > 1<<31-1 || len(v) > 1<<31-1 {
			return nil, fmt.Errorf("param %s too long", k)
		}
		writeLen(&p, len(k))
		writeLen(&p, len(v))
		p.WriteString(k)
		p.WriteString(v)
	}
	for data := p.Bytes(); len(data) > 0; {
		n := min(len(data), 0xffff)
		writeRecord(&b, typeParams, data[:n])
		data = data[n:]
	}
	writeRecord(&b, typeParams, nil)
	writeRecord(&b, typeStdin, nil)
	return b.Bytes(), nil
}

func writeLen(b *bytes.Buffer, n int) {
	if n < 128 {
		b.WriteByte(byte(n))
		return
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(n)|1<<31)
	b.Write(l[:])
}

// writeRecord writes one record of content, padded to a multiple of 8.
func writeRecord(b *bytes.Buffer, typ byte, content []byte) {
	pad := (8 - len(content)%8) % 8
	h := [headerLen]byte{version1, typ, 0, requestID, byte(len(content) >> 8), byte(len(content)), byte(pad), 0}
	b.Write(h[:])
	b.Write(content)
	b.Write(make([]byte, pad))
}

// ReadResponse reads the records of request 1 from r up to its
// END_REQUEST: the STDOUT stream, at most maxBody bytes of it, parsed as a
// CGI response, and the STDERR stream. A record of another version or
// request, a truncated record, an END_REQUEST refusing the request or a
// stream that ends before END_REQUEST is an error.
func ReadResponse(r io.Reader, maxBody int) (*Response, error) {
	var stdout bytes.Buffer
	var stderr strings.Builder
	var h [headerLen]byte
	content := make([]byte, 0xffff+0xff)
	for range maxRecords {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("connection closed before the end of the response")
			}
			return nil, fmt.Errorf("read record header: %w", err)
		}
		if h[0] != version1 {
			return nil, fmt.Errorf("not a FastCGI record (version %d)", h[0])
		}
		id := binary.BigEndian.Uint16(h[2:4])
		n := int(binary.BigEndian.Uint16(h[4:6])) + int(h[6])
		body := content[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("read record of type %d: truncated: %w", h[1], err)
		}
		body = body[:binary.BigEndian.Uint16(h[4:6])]
		if id != requestID {
			return nil, fmt.Errorf("record for request %d, want %d", id, requestID)
		}
		switch h[1] {
		case typeStdout:
			if stdout.Len()+len(body) > maxBody {
				return nil, fmt.Errorf("%w of %d bytes", ErrTooLarge, maxBody)
			}
			stdout.Write(body)
		case typeStderr:
			if room := maxStderr - stderr.Len(); room > 0 {
				stderr.Write(body[:min(room, len(body))])
			}
		case typeEndRequest:
			if len(body) < 8 {
				return nil, fmt.Errorf("END_REQUEST of %d bytes, want 8", len(body))
			}
			if ps := body[4]; ps != requestComplete {
				return nil, fmt.Errorf("request refused (protocol status %d: %s)", ps, protocolStatus(ps))
			}
			resp, err := parseCGI(stdout.Bytes())
			if err != nil {
				return nil, err
			}
			resp.Stderr = stderr.String()
			resp.AppStatus = binary.BigEndian.Uint32(body[:4])
			return resp, nil
		default:
			return nil, fmt.Errorf("unexpected record type %d", h[1])
		}
	}
	return nil, fmt.Errorf("no END_REQUEST within %d records", maxRecords)
}

func protocolStatus(s byte) string {
	switch s {
	case 1:
		return "cannot multiplex"
	case 2:
		return "overloaded"
	case 3:
		return "unknown role"
	}
	return "unknown"
}

// parseCGI splits a CGI response into its status, headers and body.
func parseCGI(out []byte) (*Response, error) {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(out)))
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		if len(out) == 0 {
			return nil, errors.New("empty response")
		}
		return nil, fmt.Errorf("response headers: %w", err)
	}
	status := 200
	if s := hdr.Get("Status"); s != "" {
		code, _, _ := strings.Cut(s, " ")
		n, err := strconv.Atoi(code)
		if err != nil || n < 100 || n > 999 {
			return nil, fmt.Errorf("bad Status header %q", s)
		}
		status = n
	}
	body, _ := io.ReadAll(tp.R)
	return &Response{Status: status, Header: hdr, Body: body}, nil
}

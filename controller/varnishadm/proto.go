package varnishadm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// CLI status codes this package branches on (include/vcli.h).
const (
	statusAuth      = 107 // CLIS_AUTH: the server sent an authentication challenge
	statusOK        = 200 // CLIS_OK
	statusTruncated = 201 // CLIS_TRUNCATED: success, body cut at the cli_limit parameter
	statusComms     = 400 // CLIS_COMMS: the manager lost its cache child while passing the command on
	statusClose     = 500 // CLIS_CLOSE: the server closes the session after this response
)

// headerLen is the size of a response header, "%-3d %-8zd\n"
// (CLI_LINE0_LEN, written by VCLI_WriteResult in lib/libvarnish/vcli_proto.c).
const headerLen = 13

// MaxResponse caps the body length a response may declare. Varnish's own
// header format allows at most 99999999 bytes; its cli_limit parameter
// (48k by default) truncates real answers long before that. A larger
// declared length is treated as a protocol error instead of an allocation.
const MaxResponse = 16 << 20

// errProtocol marks a response that does not follow the CLI framing; the
// connection cannot be trusted afterwards.
var errProtocol = errors.New("varnish cli protocol error")

// readResponse reads one response frame: the 13-byte header, the body of the
// declared length, and the newline that follows the body but is not counted
// in the length. It allocates at most what the peer actually sent, bounded
// by min(declared length, max) + 1, so a lying header cannot make it reserve
// memory up front.
func readResponse(r io.Reader, max int) (status int, body string, err error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, "", fmt.Errorf("%w: truncated header %q", errProtocol, trimPartial(hdr[:]))
		}
		return 0, "", err
	}
	status, length, err := parseHeader(hdr[:])
	if err != nil {
		return 0, "", err
	}
	if length > max {
		return 0, "", fmt.Errorf("%w: declared body length %d exceeds the limit of %d bytes", errProtocol, length, max)
	}
	buf, err := readN(r, length+1)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return 0, "", fmt.Errorf("%w: connection closed after %d of %d body bytes", errProtocol, len(buf), length)
		}
		return 0, "", err
	}
	if buf[length] != '\n' {
		return 0, "", fmt.Errorf("%w: body of %d bytes not followed by a newline", errProtocol, length)
	}
	return status, string(buf[:length]), nil
}

// parseHeader parses "SSS LLLLLLLL\n": a three-digit status, a space, the
// body length left-justified in eight columns, a newline.
func parseHeader(hdr []byte) (status, length int, err error) {
	if len(hdr) != headerLen || hdr[3] != ' ' || hdr[headerLen-1] != '\n' {
		return 0, 0, fmt.Errorf("%w: malformed header %q", errProtocol, hdr)
	}
	status, ok := atoiField(hdr[0:3])
	if !ok || status < 100 || status > 999 {
		return 0, 0, fmt.Errorf("%w: bad status in header %q", errProtocol, hdr)
	}
	length, ok = atoiField(hdr[4 : headerLen-1])
	if !ok {
		return 0, 0, fmt.Errorf("%w: bad body length in header %q", errProtocol, hdr)
	}
	return status, length, nil
}

// atoiField parses a left-justified decimal field: digits, then spaces.
func atoiField(f []byte) (int, bool) {
	s := strings.TrimRight(string(f), " ")
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// readN reads exactly n bytes, growing its buffer as data arrives rather
// than trusting n for one allocation.
func readN(r io.Reader, n int) ([]byte, error) {
	const chunk = 64 << 10
	buf := make([]byte, 0, min(n, chunk))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil {
			if err == io.EOF && len(buf) == n {
				break
			}
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

func trimPartial(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// Quote renders one command argument as a CLI word that Varnish's
// argument parser (VAV_Parse and its backslash decoder in
// lib/libvarnish/vav.c) decodes back to exactly s. Only the escapes that
// parser knows are used: \" \\ \n \r \t and \xHH.
//
//   - Words are sent bare, with escapes, not inside double quotes: Varnish
//     7.0 to 7.4 reject a quoted word that follows another quoted word
//     ("Missing separator between arguments", vav.c from commit a2ab44dec
//     until 57c230638), while backslash escapes work in bare words in
//     every version. Only the empty word is sent as "".
//   - A space would end a bare word, so it goes out as \x20.
//   - A raw '\n' or '\r' ends the command line (cls_feed in
//     vcli_serve.c), so both are always escaped.
//   - Other control bytes and every byte >= 0x80 go out as \xHH: the
//     parser splits words with isspace() on plain (signed) chars, which
//     also matches \v and \f and is undefined for bytes >= 0x80; escaped,
//     the request line is plain printable ASCII.
//   - NUL cannot be carried at all: arguments are C strings, so \x00 would
//     silently truncate the argument. It is rejected.
func Quote(s string) (string, error) {
	if s == "" {
		return `""`, nil
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", errors.New("argument contains a NUL byte, which the varnish cli cannot carry")
	}
	const hexdigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c <= ' ' || c >= 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hexdigits[c>>4])
			b.WriteByte(hexdigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// commandLine encodes every argument and joins them into one CLI request line.
func commandLine(args []string) (string, error) {
	if len(args) == 0 || args[0] == "" {
		return "", errors.New("empty command")
	}
	// A request whose last two words are "<<" and a non-empty word puts the
	// server into here-document mode (cls_feed in vcli_serve.c), which
	// would wait for a terminator this client never sends. Escaping does
	// not prevent it: the check runs on the decoded words.
	if n := len(args); n >= 2 && args[n-2] == "<<" && args[n-1] != "" {
		return "", errors.New(`an argument "<<" before the last one would start a cli here-document`)
	}
	var b strings.Builder
	for i, a := range args {
		q, err := Quote(a)
		if err != nil {
			return "", fmt.Errorf("argument %d: %w", i, err)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(q)
	}
	b.WriteByte('\n')
	return b.String(), nil
}

// authResponse answers a challenge as VCLI_AuthResponse does
// (lib/libvarnish/vcli_proto.c): hex SHA-256 of challenge, "\n", every byte
// of the secret file, challenge, "\n". The secret file is hashed exactly as
// stored, trailing newline included.
func authResponse(challenge string, secret []byte) string {
	h := sha256.New()
	io.WriteString(h, challenge)
	io.WriteString(h, "\n")
	h.Write(secret)
	io.WriteString(h, challenge)
	io.WriteString(h, "\n")
	return hex.EncodeToString(h.Sum(nil))
}

// parseChallenge extracts the 32-letter challenge from a 107 response body,
// "<32 lower-case letters>\n\nAuthentication required.\n"
// (mgt_cli_challenge in bin/varnishd/mgt/mgt_cli.c).
func parseChallenge(body string) (string, error) {
	if len(body) < 33 || body[32] != '\n' {
		return "", fmt.Errorf("%w: malformed authentication challenge", errProtocol)
	}
	for i := 0; i < 32; i++ {
		if body[i] < 'a' || body[i] > 'z' {
			return "", fmt.Errorf("%w: malformed authentication challenge", errProtocol)
		}
	}
	return body[:32], nil
}

// newReader sizes the buffered reader of a connection.
func newReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 16<<10) }

// Package varnishadm is a native client for Varnish's CLI protocol, the
// admin port that varnishd opens with -T and protects with the -S secret.
package varnishadm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrAuth is returned when varnishd rejects the secret. The error that wraps
// it names the address, never the secret.
var ErrAuth = errors.New("varnish cli authentication failed: the secret does not match varnishd's -S file")

// CLIError is a response with a status other than 200 (OK) or 201
// (truncated). Text is Varnish's message, for example the VCC compiler's
// output for a VCL that does not compile.
type CLIError struct {
	Status int
	Text   string
}

func (e *CLIError) Error() string {
	return fmt.Sprintf("varnish cli status %d: %s", e.Status, strings.TrimSpace(e.Text))
}

// ChildLost reports whether the manager answered err because its cache
// child went away during the command: sent again once the new child runs
// (most often the next moment), it works.
func ChildLost(err error) bool {
	var ce *CLIError
	return errors.As(err, &ce) && ce.Status == statusComms
}

// Defaults for commands whose context carries no deadline.
const (
	DefaultTimeout     = 2 * time.Second
	DefaultLoadTimeout = 30 * time.Second
)

// Client talks to one varnishd admin port over a single connection, dialled
// on the first command and re-dialled after any failure. It is safe for
// concurrent use; commands are serialised. Create it with New or
// NewFromFile.
//
// Every command is bounded by its context's deadline. When the context has
// none, Timeout applies, or LoadTimeout for vcl.inline and vcl.load, which
// run the VCL compiler and a C compiler and may take seconds on a busy box.
// The deadline covers waiting for the connection, dialling, authenticating,
// writing and reading.
type Client struct {
	// Timeout bounds commands without a context deadline (default 2s).
	// Set before the first command.
	Timeout time.Duration
	// LoadTimeout bounds vcl.inline and vcl.load without a context
	// deadline (default 30s). Set before the first command.
	LoadTimeout time.Duration

	addr   string
	secret []byte

	sem chan struct{} // held by the one command in flight

	mu       sync.Mutex // guards conn, closed and sessions, so Close need not wait for sem
	conn     *conn
	closed   bool
	sessions int64 // authenticated sessions opened
}

// conn is one authenticated session.
type conn struct {
	net.Conn
	rd       *bufio.Reader
	received int64 // bytes read from the socket so far
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.received += int64(n)
	return n, err
}

// New returns a client for the admin port at addr ("host:port") that
// authenticates with secret, the bytes of varnishd's -S file exactly as
// stored. It does no I/O.
func New(addr string, secret []byte) *Client {
	return &Client{
		Timeout:     DefaultTimeout,
		LoadTimeout: DefaultLoadTimeout,
		addr:        addr,
		secret:      append([]byte(nil), secret...),
		sem:         make(chan struct{}, 1),
	}
}

// NewFromFile is New with the secret read from secretFile, byte for byte:
// a trailing newline is part of the secret, as varnishd hashes it too.
func NewFromFile(addr, secretFile string) (*Client, error) {
	secret, err := os.ReadFile(secretFile)
	if err != nil {
		return nil, fmt.Errorf("read varnish secret file: %w", err)
	}
	if len(secret) == 0 {
		// varnishd refuses to start with an empty -S file.
		return nil, fmt.Errorf("read varnish secret file %s: file is empty", secretFile)
	}
	return New(addr, secret), nil
}

// Addr returns the admin address the client talks to.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection, interrupting a command in flight. Commands
// after Close fail with an error wrapping net.ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// Run sends one command, escaping every argument so that Varnish receives
// it byte for byte (see Quote), and returns the response
// body when the status is 200, or 201 (the body was cut at varnishd's
// cli_limit parameter). Any other status is a *CLIError. Errors name the
// command (its first word only) and the address.
func (c *Client) Run(ctx context.Context, args ...string) (string, error) {
	_, body, err := c.run(ctx, args)
	return body, err
}

// run is Run that also returns the success status, 200 or 201.
func (c *Client) run(ctx context.Context, args []string) (int, string, error) {
	if len(args) == 0 {
		return 0, "", fmt.Errorf("varnish cli on %s: empty command", c.addr)
	}
	name := args[0]
	line, err := commandLine(args)
	if err != nil {
		return 0, "", fmt.Errorf("%s on %s: %w", name, c.addr, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.defaultTimeout(name))
		defer cancel()
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, "", fmt.Errorf("%s on %s: waiting for the connection: %w", name, c.addr, ctx.Err())
	}
	defer func() { <-c.sem }()

	status, body, err := c.roundTrip(ctx, line)
	if err != nil {
		return 0, "", c.wrapIOError(ctx, name, err)
	}
	body = Redact(body, c.secret)
	if status != statusOK && status != statusTruncated {
		return 0, "", fmt.Errorf("%s on %s: %w", name, c.addr, &CLIError{Status: status, Text: body})
	}
	return status, body, nil
}

func (c *Client) defaultTimeout(name string) time.Duration {
	if name == "vcl.inline" || name == "vcl.load" {
		if c.LoadTimeout > 0 {
			return c.LoadTimeout
		}
		return DefaultLoadTimeout
	}
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// wrapIOError names the command and address, and makes a timeout caused by
// the deadline match context.DeadlineExceeded (or context.Canceled).
func (c *Client) wrapIOError(ctx context.Context, name string, err error) error {
	ctxErr := ctx.Err()
	if ctxErr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// The socket deadline is the context's deadline; the socket
		// may notice a few microseconds before the context's timer.
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%s on %s: %w: %w", name, c.addr, ctxErr, err)
	}
	return fmt.Errorf("%s on %s: %w", name, c.addr, err)
}

// roundTrip sends line and reads the response, dialling first when there is
// no connection. A connection that has failed in any way is closed and
// forgotten, so the next command dials afresh.
//
// A reused connection that turns out to be dead before a single response
// byte arrives (varnishd restarted while the client was idle) is re-dialled
// and the command sent once more: nothing was answered, so with varnishd
// restarted nothing of the first attempt can have taken effect.
func (c *Client) roundTrip(ctx context.Context, line string) (int, string, error) {
	cn, reused, err := c.current(ctx)
	if err != nil {
		return 0, "", err
	}
	status, body, received, err := c.exchange(ctx, cn, line)
	if err == nil {
		return status, body, nil
	}
	if !reused || received || ctx.Err() != nil || !isPeerGone(err) {
		return 0, "", err
	}
	cn, _, err = c.current(ctx)
	if err != nil {
		return 0, "", err
	}
	status, body, _, err = c.exchange(ctx, cn, line)
	return status, body, err
}

// current returns the open connection, or dials and authenticates one.
func (c *Client) current(ctx context.Context) (cn *conn, reused bool, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false, fmt.Errorf("client closed: %w", net.ErrClosed)
	}
	cn = c.conn
	c.mu.Unlock()
	if cn != nil {
		return cn, true, nil
	}
	cn, err = c.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cn.Close()
		return nil, false, fmt.Errorf("client closed: %w", net.ErrClosed)
	}
	c.conn = cn
	c.sessions++
	return cn, false, nil
}

// Sessions returns how many authenticated sessions the client has opened.
// It grows when a lost connection was re-dialled: after a manager
// restart, say, when every VCL and label the manager had is gone or
// rebuilt by its -I file.
func (c *Client) Sessions() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions
}

// drop closes cn and forgets it if it is still the current connection.
func (c *Client) drop(cn *conn) {
	cn.Close()
	c.mu.Lock()
	if c.conn == cn {
		c.conn = nil
	}
	c.mu.Unlock()
}

// exchange writes one request line and reads its response on cn. received
// reports whether any byte arrived after the request was written.
func (c *Client) exchange(ctx context.Context, cn *conn, line string) (status int, body string, received bool, err error) {
	before := cn.received
	disarm := arm(ctx, cn)
	defer func() {
		if !disarm() && err == nil {
			// The context ended while the answer came in; the socket
			// deadline may be moved under us at any moment, so this
			// connection is done.
			c.drop(cn)
		}
	}()
	if _, err = io.WriteString(cn, line); err != nil {
		c.drop(cn)
		return 0, "", cn.received > before, err
	}
	status, body, err = readResponse(cn.rd, MaxResponse)
	if err != nil {
		c.drop(cn)
		return 0, "", cn.received > before, err
	}
	if status == statusClose {
		c.drop(cn)
	}
	return status, body, true, nil
}

// arm applies ctx's deadline to the socket and makes a cancellation
// interrupt blocked I/O. The returned func reports false when ctx ended
// before it was called.
func arm(ctx context.Context, cn *conn) (disarm func() bool) {
	dl, _ := ctx.Deadline()
	cn.SetDeadline(dl)
	return context.AfterFunc(ctx, func() { cn.SetDeadline(time.Unix(1, 0)) })
}

// dial connects and authenticates. Varnish opens every session with either
// a 107 challenge (-S given) or a 200 banner (no -S); see mgt_cli_setup in
// bin/varnishd/mgt/mgt_cli.c.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	cn := &conn{Conn: nc}
	cn.rd = newReader(cn)
	disarm := arm(ctx, cn)
	err = c.authenticate(cn)
	if !disarm() && err == nil {
		// The context ended as the session came up: its deadline may
		// still be applied to the socket, so do not keep it.
		err = ctx.Err()
	}
	if err != nil {
		cn.Close()
		return nil, err
	}
	return cn, nil
}

func (c *Client) authenticate(cn *conn) error {
	status, body, err := readResponse(cn.rd, MaxResponse)
	if err != nil {
		return fmt.Errorf("read greeting: %w", err)
	}
	switch status {
	case statusOK:
		return nil
	case statusAuth:
	default:
		return fmt.Errorf("greeting: %w", &CLIError{Status: status, Text: Redact(body, c.secret)})
	}
	challenge, err := parseChallenge(body)
	if err != nil {
		return err
	}
	if len(c.secret) == 0 {
		return fmt.Errorf("%w (no secret configured)", ErrAuth)
	}
	if _, err := io.WriteString(cn, "auth "+authResponse(challenge, c.secret)+"\n"); err != nil {
		return fmt.Errorf("send auth: %w", err)
	}
	status, body, err = readResponse(cn.rd, MaxResponse)
	if err != nil {
		return fmt.Errorf("read auth answer: %w", err)
	}
	switch status {
	case statusOK:
		return nil
	case statusAuth, statusClose:
		// A wrong answer closes the session in Varnish 7 (CLIS_CLOSE,
		// mcf_auth in bin/varnishd/mgt/mgt_cli.c); older versions sent
		// a fresh challenge (CLIS_AUTH) instead.
		return ErrAuth
	default:
		return fmt.Errorf("auth: %w", &CLIError{Status: status, Text: Redact(body, c.secret)})
	}
}

// isPeerGone reports errors that mean the server closed the connection.
func isPeerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// RedactError returns err with every old in the text of Varnish's answer
// replaced by new: a compiler's message quotes the line at fault, which
// may hold a secret. Other errors are returned as they are.
func RedactError(err error, old, new string) error {
	var ce *CLIError
	if old == "" || !errors.As(err, &ce) || !strings.Contains(ce.Text, old) {
		return err
	}
	return &CLIError{Status: ce.Status, Text: strings.ReplaceAll(ce.Text, old, new)}
}

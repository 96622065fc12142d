package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// ErrUnreachable is wrapped by every Client error that means the daemon
// could not be reached on its socket (not running, socket missing,
// permission denied).
var ErrUnreachable = errors.New("gearshift daemon not reachable")

// ErrNoAnswer is wrapped by a Client error that means the daemon accepted
// the request but did not answer before the deadline (busy, e.g. waiting
// for a Varnish that takes long to compile a profile).
var ErrNoAnswer = errors.New("gearshift daemon did not answer")

// DefaultTimeout bounds a Client call whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// APIError is an error answer of the daemon (a 4xx or 5xx with {"error": …}).
type APIError struct {
	StatusCode int    // HTTP status code
	Message    string // the daemon's "error" field
}

func (e *APIError) Error() string { return e.Message }

// maxAnswer caps what the client reads of an answer: generous for the
// largest status the daemon produces (config.MaxTargets targets, each
// with an error of up to Varnish's cli_limit, 48 KiB by default), finite
// against a socket that streams without end.
var maxAnswer int64 = 64 << 20

// Client talks to a running daemon over its control socket.
// Its zero value is not usable; create one with NewClient.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the daemon listening on the Unix socket path.
// Every call is bounded by its context; without a deadline a call gives up
// after DefaultTimeout.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Socket returns the path of the control socket the client talks to.
func (c *Client) Socket() string { return c.socket }

// Status returns the daemon's status (GET /v1/status).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return c.do(ctx, http.MethodGet, "/v1/status", nil)
}

// SiteStatus returns the status of the site named name alone
// (GET /v1/status?site=NAME). A site the daemon does not have is an
// *APIError with StatusCode 404.
func (c *Client) SiteStatus(ctx context.Context, name string) (*SiteStatus, error) {
	var site SiteStatus
	q := url.Values{"site": {name}}
	if err := c.call(ctx, http.MethodGet, "/v1/status?"+q.Encode(), nil, &site); err != nil {
		return nil, err
	}
	if site.Name != name {
		// A daemon before sites ignores the query and answers its
		// whole status.
		return nil, fmt.Errorf("the daemon on %s answered no site %q: it knows no sites (older than 0.5?)", c.socket, name)
	}
	return &site, nil
}

// Force pins the gear st on site (every site when ""), for d or, when d
// is 0, until Auto (POST /v1/force). It returns the status once the gear
// is applied to the targets. A site the daemon does not have is an
// *APIError with StatusCode 404.
func (c *Client) Force(ctx context.Context, site string, st state.Gear, d time.Duration) (*Status, error) {
	req := ForceRequest{State: st.String(), Site: site}
	if d > 0 {
		req.For = d.String()
	}
	return c.do(ctx, http.MethodPost, "/v1/force", req)
}

// Auto releases the pin of site, or every pin (per-site ones too) when
// site is "" (POST /v1/auto). A site the daemon does not have is an
// *APIError with StatusCode 404.
func (c *Client) Auto(ctx context.Context, site string) (*Status, error) {
	if site == "" {
		// No body: every pin, as a daemon before sites understands it.
		return c.do(ctx, http.MethodPost, "/v1/auto", nil)
	}
	return c.do(ctx, http.MethodPost, "/v1/auto", AutoRequest{Site: site})
}

// Reload makes the daemon re-read its config and profiles (POST /v1/reload).
// A rejected config is an *APIError; the daemon keeps the old one in force
// and reports the error in Status.ConfigError.
func (c *Client) Reload(ctx context.Context) (*Status, error) {
	return c.do(ctx, http.MethodPost, "/v1/reload", nil)
}

func (c *Client) do(ctx context.Context, method, path string, body any) (*Status, error) {
	var st Status
	if err := c.call(ctx, method, path, body, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// call sends body (none when nil) as JSON and decodes the answer into answer.
func (c *Client) call(ctx context.Context, method, path string, body, answer any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	start := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	// The host is ignored by the Unix dialer; "gearshift" reads well in logs.
	req, err := http.NewRequestWithContext(ctx, method, "http://gearshift"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.failure(ctx, start, err)
	}
	defer resp.Body.Close()
	ans := &io.LimitedReader{R: resp.Body, N: maxAnswer + 1}
	if resp.StatusCode/100 != 2 {
		b, err := io.ReadAll(io.LimitReader(ans, 64<<10))
		if err != nil {
			return c.failure(ctx, start, fmt.Errorf("read answer: %w", err))
		}
		var e errorBody
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("daemon answered %s", resp.Status)
		}
		return &APIError{StatusCode: resp.StatusCode, Message: e.Error}
	}
	// Decoded as it arrives: a large status is never held twice.
	if err := json.NewDecoder(ans).Decode(answer); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case ans.N <= 0:
			return fmt.Errorf("decode status from %s: the answer is larger than %s", c.socket, sizeString(maxAnswer))
		case errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF:
			return fmt.Errorf("decode status from %s: %w", c.socket, err)
		}
		return c.failure(ctx, start, fmt.Errorf("read answer: %w", err))
	}
	return nil
}

// failure tells a daemon that could not be reached (ErrUnreachable) from
// one that was connected to but did not answer in time (ErrNoAnswer).
func (c *Client) failure(ctx context.Context, start time.Time, err error) error {
	var op *net.OpError
	dialFailed := errors.As(err, &op) && op.Op == "dial"
	var ne net.Error
	timedOut := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	if !dialFailed && timedOut {
		waited := time.Since(start)
		if dl, ok := ctx.Deadline(); ok {
			waited = dl.Sub(start)
		}
		return fmt.Errorf("%w within %s on %s", ErrNoAnswer, waitedString(waited), c.socket)
	}
	return fmt.Errorf("%w on %s: %w", ErrUnreachable, c.socket, unwrapURLError(err))
}

// sizeString renders a byte count as "64 MiB" or "4 KiB".
func sizeString(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// waitedString renders d for a person, to the second from ten seconds on,
// else to a tenth: "1m30s", "200ms".
func waitedString(d time.Duration) string {
	if d >= 10*time.Second {
		d = d.Round(time.Second)
	} else {
		d = d.Round(100 * time.Millisecond)
	}
	return timefmt.Short(d)
}

// unwrapURLError drops net/http's `Get "http://gearshift/v1/status":` prefix
// and the dial details, which name a URL the operator never typed.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	return err
}

// WaitAnswering waits until a daemon answers on socket, the process exits
// (a message on exited) or wait passes.
func WaitAnswering(ctx context.Context, socket string, wait time.Duration, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	c := NewClient(socket)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Status(qctx)
		qcancel()
		if err == nil {
			return nil
		}
		select {
		case err := <-exited:
			if err == nil {
				return errors.New("the daemon exited during start")
			}
			return fmt.Errorf("the daemon exited during start (%v)", err)
		case <-ctx.Done():
			return fmt.Errorf("the daemon did not answer on %s within %s", socket, wait)
		case <-tick.C:
		}
	}
}

package sensor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/gearshift/gearshift/internal/fastcgi"
)

// fetch asks for the status page and parses it.
func (p *fpmPool) fetch(ctx context.Context) (*fpmPage, error) {
	var body []byte
	var err error
	if p.client != nil {
		body, err = p.fetchHTTP(ctx)
	} else {
		body, err = p.fetchFastCGI(ctx)
	}
	if err != nil {
		return nil, err
	}
	page, err := parseFPMStatus(body, p.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.shown, err)
	}
	if p.name != "" && page.Pool != p.name {
		return nil, fmt.Errorf("%s: the status page is pool %s's, not %s's", p.shown, page.Pool, p.name)
	}
	return page, nil
}

func (p *fpmPool) fetchHTTP(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return nil, fmt.Errorf("read php-fpm status %s: %w", p.shown, err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) && uerr.Timeout() {
			return nil, absentError{fmt.Errorf("read php-fpm status %s: no answer within %s", p.shown, p.timeout)}
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, absentError{fmt.Errorf("read php-fpm status: %w", err)}
		}
		return nil, fmt.Errorf("read php-fpm status: %w", err)
	}
	defer resp.Body.Close()
	if err := throughVarnish(resp, "sensor.phpfpm", "the web server's own port, or the pool's socket"); err != nil {
		return nil, fmt.Errorf("read php-fpm status %s: %w", p.shown, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read php-fpm status %s: %s", p.shown, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPHPFPMStatus+1))
	if err != nil {
		return nil, fmt.Errorf("read php-fpm status %s: %w", p.shown, err)
	}
	if len(body) > maxPHPFPMStatus {
		return nil, fmt.Errorf("read php-fpm status %s: page larger than %d bytes", p.shown, maxPHPFPMStatus)
	}
	return body, nil
}

func (p *fpmPool) fetchFastCGI(ctx context.Context) ([]byte, error) {
	const query = "json&full"
	resp, err := fastcgi.Do(ctx, fastcgi.Request{
		Network: p.network, Address: p.addr, Timeout: p.timeout, MaxBody: maxPHPFPMStatus,
		Params: map[string]string{
			"GATEWAY_INTERFACE": "CGI/1.1",
			"SERVER_SOFTWARE":   "gearshift",
			"SERVER_PROTOCOL":   "HTTP/1.1",
			"REQUEST_METHOD":    "GET",
			"SCRIPT_NAME":       p.path,
			"SCRIPT_FILENAME":   p.path,
			"REQUEST_URI":       p.path + "?" + query,
			"QUERY_STRING":      query,
		},
	})
	if err != nil {
		return nil, p.dialError(err)
	}
	if resp.Status != http.StatusOK {
		why := strings.TrimSpace(firstLine(string(resp.Body)))
		if e := strings.TrimSpace(firstLine(resp.Stderr)); e != "" {
			why += " (" + e + ")"
		}
		return nil, fmt.Errorf("php-fpm at %s answered %s with %d %s: not the pool's pm.status_path", p.shown, p.path, resp.Status, why)
	}
	return resp.Body, nil
}

// dialError says what a failed FastCGI exchange means for the operator.
func (p *fpmPool) dialError(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return absentError{fmt.Errorf("read php-fpm status at %s: no answer within %s", p.shown, p.timeout)}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("read php-fpm status: permission denied on %s: the daemon's user needs write access to it (the pool's listen.owner, listen.group, listen.mode)", p.addr)
	case errors.Is(err, syscall.ENOENT):
		return absentError{fmt.Errorf("read php-fpm status: no socket %s (is php-fpm running, and is it the pool's listen or pm.status_listen?)", p.addr)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return absentError{fmt.Errorf("read php-fpm status: nothing listens on %s (is php-fpm running?)", p.addr)}
	}
	return fmt.Errorf("read php-fpm status at %s: %w", p.shown, err)
}

// fpmPage is what gearshift reads of a pool's status page (?json&full).
type fpmPage struct {
	Pool               string
	ProcessManager     string
	StartTime          int64
	ListenQueue        int
	ListenQueueLen     int
	ActiveProcesses    int
	TotalProcesses     int
	MaxChildrenReached uint64
	// self counts the children serving a status page now: this read's
	// own when it came through the pool's socket.
	self int
}

// parseFPMStatus parses a status page in PHP-FPM's JSON (?json, with or
// without &full). statusPath is the page's path: the children serving it
// are counted in self.
func parseFPMStatus(b []byte, statusPath string) (*fpmPage, error) {
	var raw struct {
		Pool               *string `json:"pool"`
		ProcessManager     string  `json:"process manager"`
		StartTime          int64   `json:"start time"`
		ListenQueue        *int    `json:"listen queue"`
		ListenQueueLen     int     `json:"listen queue len"`
		ActiveProcesses    *int    `json:"active processes"`
		TotalProcesses     *int    `json:"total processes"`
		MaxChildrenReached *uint64 `json:"max children reached"`
		Processes          []struct {
			State      string `json:"state"`
			RequestURI string `json:"request uri"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a PHP-FPM status page (not the JSON of ?json: %s)", shortJSONError(b, err))
	}
	var missing []string
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"pool", raw.Pool != nil}, {"listen queue", raw.ListenQueue != nil}, {"active processes", raw.ActiveProcesses != nil},
		{"total processes", raw.TotalProcesses != nil}, {"max children reached", raw.MaxChildrenReached != nil},
	} {
		if !f.ok {
			missing = append(missing, strconv.Quote(f.name))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("not a PHP-FPM status page (no %s)", strings.Join(missing, ", "))
	}
	if *raw.ListenQueue < 0 || *raw.ActiveProcesses < 0 || *raw.TotalProcesses < 0 || *raw.ActiveProcesses > *raw.TotalProcesses {
		return nil, fmt.Errorf("a status page with %d active of %d processes and a queue of %d", *raw.ActiveProcesses, *raw.TotalProcesses, *raw.ListenQueue)
	}
	page := &fpmPage{
		Pool: *raw.Pool, ProcessManager: raw.ProcessManager, StartTime: raw.StartTime,
		ListenQueue: *raw.ListenQueue, ListenQueueLen: raw.ListenQueueLen,
		ActiveProcesses: *raw.ActiveProcesses, TotalProcesses: *raw.TotalProcesses,
		MaxChildrenReached: *raw.MaxChildrenReached,
	}
	for _, proc := range raw.Processes {
		path, _, _ := strings.Cut(proc.RequestURI, "?")
		if proc.State != "Idle" && path == statusPath {
			page.self++
		}
	}
	return page, nil
}

// shortJSONError describes why b is not the JSON wanted, with its start.
func shortJSONError(b []byte, err error) string {
	start := strings.TrimSpace(string(b))
	if len(start) > 40 {
		start = start[:40] + "…"
	}
	if start == "" {
		return "an empty page"
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("it begins %q", start)
	}
	return err.Error()
}

package sensor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// ApacheStatus reads the busy-worker ratio of an Apache from mod_status's
// machine-readable page (server-status?auto).
type ApacheStatus struct {
	url     string
	shown   string // url without a password, for messages
	client  *http.Client
	maxBody int64
}

const (
	defaultApacheTimeout = 2 * time.Second
	// The ?auto page of a 2.4 event MPM with ExtendedStatus is about 1 KiB
	// plus one byte per scoreboard slot; ServerLimit tops out at 20000.
	maxApacheStatusBody = 256 << 10
)

// NewApacheStatus returns a reader of the mod_status page at rawURL. A URL
// without "auto" in its query gets "?auto", the machine-readable form.
// timeout <= 0 means 2s.
func NewApacheStatus(rawURL string, timeout time.Duration) (*ApacheStatus, error) {
	u, err := parseHTTPURL(rawURL, "apache status URL", "http://host[:port]/server-status?auto")
	if err != nil {
		return nil, err
	}
	if _, ok := u.Query()["auto"]; !ok {
		if u.RawQuery == "" {
			u.RawQuery = "auto"
		} else {
			u.RawQuery += "&auto"
		}
	}
	if timeout <= 0 {
		timeout = defaultApacheTimeout
	}
	// No keep-alive: a kept connection holds an Apache worker (prefork)
	// between polls, counted busy.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	return &ApacheStatus{url: u.String(), shown: u.Redacted(), client: client, maxBody: maxApacheStatusBody}, nil
}

// URL returns the URL read, with "?auto" (and without a password).
func (a *ApacheStatus) URL() string { return a.shown }

// throughVarnish says what to fix when resp came through Varnish (it
// carries X-Varnish): gearshift's profiles never answer a status page
// there (docs/frontdoor.md), and a page Varnish served would be its
// copy, not the server's.
func throughVarnish(resp *http.Response, key, instead string) error {
	if resp.Header.Get("X-Varnish") == "" {
		return nil
	}
	return fmt.Errorf("the URL goes through Varnish, which never serves status pages: point %s at %s", key, instead)
}

// BusyRatio fetches the status page and returns BusyWorkers over the
// scoreboard's slots, 0 to 1.
func (a *ApacheStatus) BusyRatio(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url, nil)
	if err != nil {
		return 0, fmt.Errorf("read apache status %s: %w", a.shown, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read apache status: %w", err)
	}
	defer resp.Body.Close()
	if err := throughVarnish(resp, "sensor.apache_status", "Apache's own port"); err != nil {
		return 0, fmt.Errorf("read apache status %s: %w", a.shown, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read apache status %s: %s", a.shown, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, a.maxBody+1))
	if err != nil {
		return 0, fmt.Errorf("read apache status %s: %w", a.shown, err)
	}
	if int64(len(body)) > a.maxBody {
		return 0, fmt.Errorf("read apache status %s: page larger than %d bytes", a.shown, a.maxBody)
	}
	busy, slots, err := parseApacheStatus(string(body))
	if err != nil {
		return 0, fmt.Errorf("parse apache status %s: %w", a.shown, err)
	}
	return float64(busy) / float64(slots), nil
}

// parseApacheStatus parses mod_status's ?auto text and returns BusyWorkers
// and the number of scoreboard slots: the length of the Scoreboard line,
// where every character is a slot ("." an open one, no process in it yet).
// BusyWorkers counts the request reading the status page too.
func parseApacheStatus(text string) (busy, slots int, err error) {
	haveBusy := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), maxApacheStatusBody)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch key {
		case "BusyWorkers":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return 0, 0, fmt.Errorf("BusyWorkers %q is not a count", value)
			}
			busy, haveBusy = n, true
		case "Scoreboard":
			slots = len(value)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	switch {
	case !haveBusy && slots == 0:
		return 0, 0, errors.New("no BusyWorkers or Scoreboard line: not a mod_status ?auto page")
	case !haveBusy:
		return 0, 0, errors.New("no BusyWorkers line")
	case slots == 0:
		return 0, 0, errors.New("no Scoreboard line")
	case busy > slots:
		return 0, 0, fmt.Errorf("BusyWorkers %d exceeds the scoreboard's %d slots", busy, slots)
	}
	return busy, slots, nil
}

// ApacheBusyRatio is the signal of the apache_status source.
const ApacheBusyRatio = "apache_busy_ratio"

var apacheSource = Source{
	Name: "apache_status",
	Key:  "sensor.apache_status",
	Signals: []state.Signal{{
		Name: ApacheBusyRatio, Backend: true, Direction: state.Rises, Precision: 2, Max: 1,
		Bound:      state.BusyBound,
		Help:       "Apache's busy workers over its scoreboard slots (mod_status), 0 to 1.",
		Metric:     "gearshift_apache_busy_ratio",
		StatusLine: "apache busy",
	}},
	On: on(func(cfg HostConfig) string { return cfg.Sensor.ApacheStatus }),
	Check: func(cfg HostConfig, problem func(key, format string, args ...any)) {
		if u := cfg.Sensor.ApacheStatus; u != "" {
			if _, err := NewApacheStatus(u, 0); err != nil {
				problem("sensor.apache_status", "%v", err)
			}
		}
	},
	Open: func(cfg HostConfig) (Reader, error) { return NewApacheStatus(cfg.Sensor.ApacheStatus, 0) },
}

// Read implements Reader: the busy ratio.
func (a *ApacheStatus) Read(ctx context.Context) (func(*Sample), error) {
	v, err := a.BusyRatio(ctx)
	if err != nil {
		return nil, err
	}
	return func(s *Sample) { s.Values[ApacheBusyRatio] = v }, nil
}

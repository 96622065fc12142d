package sensor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/sockdiag"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// PHPFPMConfig is the `sensor.phpfpm` block: the status page of a PHP-FPM
// pool (pm.status_path), read over HTTP or straight over the pool's
// FastCGI socket, and of more pools beside it.
type PHPFPMConfig struct {
	// URL is the status page over HTTP (http://127.0.0.1/fpm-status;
	// "json" is added to the query); "": read it over Socket.
	URL string `yaml:"url"`
	// Socket is the FastCGI address the status page is asked on: a unix
	// socket path or host:port, the pool's pm.status_listen best (its own
	// listen works until every child is busy); "": none.
	Socket string `yaml:"socket"`
	// Path is the pool's pm.status_path, asked for over Socket.
	Path string `yaml:"path"`
	// Listen is the pool's own listen socket when it is a unix socket,
	// whose accept queue the kernel is asked for (PHP-FPM reports 0 for
	// one, PHP bug #80739); "": Socket when that is a unix socket the
	// pool's children answer on.
	Listen string `yaml:"listen"`
	// MaxChildren is the pool's pm.max_children, which its status page
	// does not give; 0: the total processes of a pool with pm = static.
	MaxChildren int              `yaml:"max_children"`
	Timeout     timefmt.Duration `yaml:"timeout"` // per read of a status page; a slower answer is unavailable
	// Pools are more pools read beside the one above, each named; their
	// queues and rates are summed, the busiest one's ratio counts. A pool
	// a site names as its phpfpm_pool is that site's alone, out of the
	// sums.
	Pools []PHPFPMPool `yaml:"pools"`
}

// StatusPaths are the paths of the status pages c reads, as a web server
// in front of the pools would route them (the URL's path, or
// pm.status_path over a socket), without repeats; none when c reads
// none.
func (c PHPFPMConfig) StatusPaths() []string {
	var paths []string
	add := func(url, socket, path string) {
		switch {
		case url != "":
			if u, err := neturl.Parse(url); err == nil && u.Path != "" && u.Path != "/" {
				path = u.Path
			} else {
				return
			}
		case socket == "":
			return
		case path == "":
			path = DefaultPHPFPMPath
		}
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	add(c.URL, c.Socket, c.Path)
	for _, p := range c.Pools {
		if p.Path == "" {
			p.Path = c.Path
		}
		add(p.URL, p.Socket, p.Path)
	}
	return paths
}

// PHPFPMPool is one pool of sensor.phpfpm.pools: the settings of the block
// for one pool, and the name its status page must give.
type PHPFPMPool struct {
	Name        string `yaml:"name"`         // the pool's name ([www]), as its status page gives it
	URL         string `yaml:"url"`          // as sensor.phpfpm.url
	Socket      string `yaml:"socket"`       // as sensor.phpfpm.socket
	Path        string `yaml:"path"`         // as sensor.phpfpm.path; "": sensor.phpfpm.path
	Listen      string `yaml:"listen"`       // as sensor.phpfpm.listen
	MaxChildren int    `yaml:"max_children"` // as sensor.phpfpm.max_children
}

// The signals of the phpfpm source.
const (
	PHPFPMQueue              = "phpfpm_queue"
	PHPFPMBusyRatio          = "phpfpm_busy_ratio"
	PHPFPMMaxChildrenReached = "phpfpm_max_children_reached"
)

// Limits of the phpfpm source.
const (
	DefaultPHPFPMPath    = "/status"
	DefaultPHPFPMTimeout = time.Second
	maxPHPFPMTimeout     = 10 * time.Second
	maxPHPFPMPools       = 64
	// maxPHPFPMStatus bounds a status page: ?full adds about 350 bytes a
	// child, and a pool of 2000 children is a big one.
	maxPHPFPMStatus = 1 << 20
)

var phpfpmSource = Source{
	Name: "phpfpm",
	Key:  "sensor.phpfpm",
	Signals: []state.Signal{
		{
			Name: PHPFPMQueue, Backend: true, Direction: state.Rises, Precision: 0,
			Bound:      state.AboveZero,
			Help:       "Requests waiting for a free PHP-FPM child (the listen queue; a unix socket's from the kernel), summed over the pools.",
			Metric:     "gearshift_phpfpm_listen_queue",
			StatusLine: "php-fpm", StatusPart: "queue",
			// A request waiting for PHP: a step down would add to the wait.
			Distress: new(float64),
		},
		{
			Name: PHPFPMBusyRatio, Backend: true, Direction: state.Rises, Precision: 2, Max: 1,
			Bound:      state.BusyBound,
			Help:       "PHP-FPM children serving a request (status reads aside) over pm.max_children, of the busiest pool (0 to 1).",
			Metric:     "gearshift_phpfpm_busy_ratio",
			StatusLine: "php-fpm", StatusPart: "busy",
		},
		{
			Name: PHPFPMMaxChildrenReached, Backend: true, Unit: "/s", Direction: state.Rises, Precision: 2,
			Help:       "Times per second PHP-FPM wanted a child past pm.max_children (its max children reached counter), summed over the pools.",
			Metric:     "gearshift_phpfpm_max_children_reached_per_second",
			StatusLine: "php-fpm", StatusPart: "max children reached/s",
		},
	},
	// A queue means a request waited for a child: the pool is at its
	// ceiling now, not at the next surge. Three samples of it (up_confirm)
	// is moderate, and moderate stays while any request still waits.
	// Nine children busy in ten is heavy: the next requests queue, and
	// every page heavy caches is one PHP need not render; heavy stays
	// while seven in ten are busy (its hysteresis, as load's 1.5/1.0).
	// A gear added to state.All after Heavy fails to compile here until
	// it has its rule; one added between, TestDefaultRulesCoverGears.
	Rules: [...]state.Band{
		state.Light:    {},
		state.Moderate: {Enter: state.Rule{PHPFPMQueue: 1}, Stay: state.Rule{PHPFPMQueue: 1}},
		state.Heavy:    {Enter: state.Rule{PHPFPMBusyRatio: 0.9}, Stay: state.Rule{PHPFPMBusyRatio: 0.7}},
	},
	On:    func(cfg HostConfig) bool { return cfg.Sensor.PHPFPM.on() },
	Check: func(cfg HostConfig, problem func(key, format string, args ...any)) { cfg.Sensor.PHPFPM.check(problem) },
	Open: func(cfg HostConfig) (Reader, error) {
		r, err := NewPHPFPM(cfg.Sensor.PHPFPM)
		if err != nil {
			return nil, err
		}
		r.ForSites(cfg.SitePools)
		return r, nil
	},
	Reach: func(ctx context.Context, cfg HostConfig, problem, absent func(key, format string, args ...any)) {
		p, err := NewPHPFPM(cfg.Sensor.PHPFPM)
		if err != nil {
			return // Check's to report
		}
		p.reach(ctx, problem, absent)
	},
}

func (c PHPFPMConfig) on() bool { return c.URL != "" || c.Socket != "" || len(c.Pools) > 0 }

// pools returns the pools of the block with their keys: the block's own
// when it names a page, then sensor.phpfpm.pools.
func (c PHPFPMConfig) pools() (keys []string, pools []PHPFPMPool) {
	if c.URL != "" || c.Socket != "" {
		keys = append(keys, "sensor.phpfpm")
		pools = append(pools, PHPFPMPool{URL: c.URL, Socket: c.Socket, Path: c.Path, Listen: c.Listen, MaxChildren: c.MaxChildren})
	}
	for i, p := range c.Pools {
		if p.Path == "" {
			p.Path = c.Path
		}
		keys = append(keys, fmt.Sprintf("sensor.phpfpm.pools[%d]", i))
		pools = append(pools, p)
	}
	return keys, pools
}

func (c PHPFPMConfig) check(problem func(key, format string, args ...any)) {
	if !c.on() {
		if c.Listen != "" || c.MaxChildren != 0 {
			problem("sensor.phpfpm", "listen and max_children belong to a pool: give its url or socket")
		}
		return
	}
	if t := c.Timeout; t <= 0 || t > timefmt.Duration(maxPHPFPMTimeout) {
		problem("sensor.phpfpm.timeout", "must be positive and at most %s, got %s", timefmt.Duration(maxPHPFPMTimeout), t)
	}
	if c.URL == "" && c.Socket == "" && (c.Listen != "" || c.MaxChildren != 0) {
		problem("sensor.phpfpm", "listen and max_children belong to the pool of sensor.phpfpm.url or socket, which is not set: put them in its entry of pools")
	}
	if len(c.Pools) > maxPHPFPMPools {
		problem("sensor.phpfpm.pools", "at most %d pools, got %d", maxPHPFPMPools, len(c.Pools))
	}
	names := map[string]int{}
	keys, pools := c.pools()
	for i, p := range pools {
		key := keys[i]
		if key != "sensor.phpfpm" {
			switch j, dup := names[p.Name]; {
			case p.Name == "":
				problem(key+".name", "must name the pool ([www] in its pool file is www): its status page is checked to be that pool's")
			case dup:
				problem(key+".name", "pool %s is already sensor.phpfpm.pools[%d]", p.Name, j)
			default:
				names[p.Name] = i
			}
		}
		if _, err := newFPMPool(p, 0); err != nil {
			var ke keyError
			if errors.As(err, &ke) {
				problem(key+"."+ke.key, "%v", ke.err)
			} else {
				problem(key, "%v", err)
			}
		}
	}
}

// keyError is a pool's setting that is wrong, named by its key under the pool.
type keyError struct {
	key string
	err error
}

func (e keyError) Error() string { return e.key + ": " + e.err.Error() }

// PHPFPM reads the status pages of the configured pools, all at once.
type PHPFPM struct {
	pools []*fpmPool
	now   func() time.Time
}

// NewPHPFPM returns the reader of cfg's pools.
func NewPHPFPM(cfg PHPFPMConfig) (*PHPFPM, error) {
	timeout := time.Duration(cfg.Timeout)
	if timeout <= 0 {
		timeout = DefaultPHPFPMTimeout
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPHPFPMPath
	}
	r := &PHPFPM{now: time.Now}
	keys, pools := cfg.pools()
	for i, p := range pools {
		fp, err := newFPMPool(p, timeout)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keys[i], err)
		}
		fp.key = keys[i]
		r.pools = append(r.pools, fp)
	}
	if len(r.pools) == 0 {
		return nil, errors.New("sensor.phpfpm: no pool: give url, socket or pools")
	}
	return r, nil
}

// fpmPool is one pool's status page and what is remembered of it.
type fpmPool struct {
	key     string // its config key, for problems
	name    string // the name its page must give; "" any
	site    string // the site whose phpfpm_pool it is; "": the server's
	shown   string // where its page is read, for messages
	timeout time.Duration
	maxKids int

	// Over HTTP: the client and the URL (with json&full).
	client *http.Client
	url    string
	// Over FastCGI: the address and the status path.
	network, addr, path string
	// listen is the unix socket whose accept queue is the queue: the
	// configured listen, else the FastCGI socket when it is the pool's
	// own (found at a read, see ownSocket).
	listen    string
	ownSocket bool // Socket is a unix socket and listen was not given

	reached counterRate
}

// newFPMPool checks p and returns its reader; timeout 0 is for a check.
func newFPMPool(p PHPFPMPool, timeout time.Duration) (*fpmPool, error) {
	fp := &fpmPool{name: p.Name, timeout: timeout, maxKids: p.MaxChildren, listen: p.Listen}
	path := p.Path
	if path == "" {
		path = DefaultPHPFPMPath
	}
	switch {
	case p.URL != "" && p.Socket != "":
		return nil, keyError{"socket", errors.New("give url or socket, not both")}
	case p.URL != "":
		u, err := parseHTTPURL(p.URL, "php-fpm status URL", "http://host[:port]/status-path")
		if err != nil {
			return nil, keyError{"url", err}
		}
		q := u.Query()
		q.Del("json")
		q.Del("full")
		u.RawQuery = q.Encode()
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += "json&full"
		fp.url, fp.shown, fp.path = u.String(), u.Redacted(), u.Path
		// No keep-alive: a kept connection would hold a web server worker.
		fp.client = &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	case p.Socket != "":
		if !strings.HasPrefix(path, "/") {
			return nil, keyError{"path", fmt.Errorf("must be the pool's pm.status_path, starting with /, got %q", path)}
		}
		fp.path = path
		if strings.HasPrefix(p.Socket, "/") {
			fp.network, fp.addr = "unix", p.Socket
			if fp.listen == "" {
				fp.listen, fp.ownSocket = p.Socket, true
			}
		} else if err := checkAddr(p.Socket); err != nil {
			return nil, keyError{"socket", err}
		} else {
			fp.network, fp.addr = "tcp", p.Socket
		}
		fp.shown = fp.addr
	default:
		return nil, errors.New("give url (the status page over HTTP) or socket (the pool's FastCGI address)")
	}
	if p.Listen != "" && !filepath.IsAbs(p.Listen) {
		return nil, keyError{"listen", fmt.Errorf("must be the absolute path of the pool's unix socket, got %q", p.Listen)}
	}
	if p.MaxChildren < 0 {
		return nil, keyError{"max_children", fmt.Errorf("must be the pool's pm.max_children, or 0 for a static pool's processes, got %d", p.MaxChildren)}
	}
	if fp.name != "" {
		fp.shown = "pool " + fp.name + " at " + fp.shown
	}
	return fp, nil
}

// checkAddr checks a FastCGI host:port.
func checkAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("%q is neither a unix socket's absolute path nor host:port (127.0.0.1:9000)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be a number between 1 and 65535", s)
	}
	return nil
}

// fpmReading is one read of a pool: its figures, each with ok.
type fpmReading struct {
	queue     float64
	queueErr  error
	busy      float64
	busyErr   error
	reached   float64
	reachedOK bool
}

// Read implements Reader: every pool at once. A pool that cannot be read
// makes the sums unknown (a part would look like the queue fell), with
// the reason in a Problem named after it. A site's pool is not in the
// sums: its figures are the site's (Sample.Sites), and none are the
// server's when every pool is a site's.
func (r *PHPFPM) Read(ctx context.Context) (func(*Sample), error) {
	readings := make([]fpmReading, len(r.pools))
	errs := make([]error, len(r.pools))
	var wg sync.WaitGroup
	for i, p := range r.pools {
		wg.Go(func() { readings[i], errs[i] = p.read(ctx, r.now) })
	}
	wg.Wait()
	var problems Problems
	queue, busy, reached := 0.0, 0.0, 0.0
	server := r.serverPools()
	queueOK, busyOK, reachedOK := server, server, server
	for i, p := range r.pools {
		if errs[i] != nil {
			problems = append(problems, Problem{Source: p.problemName(), Err: errs[i]})
			if p.site == "" {
				queueOK, busyOK, reachedOK = false, false, false
			}
			continue
		}
		g := readings[i]
		// One problem a pool, so that the log's backoff counts polls.
		switch {
		case g.queueErr != nil && g.busyErr != nil:
			problems = append(problems, Problem{Source: p.problemName(), Err: fmt.Errorf("%w; %w", g.queueErr, g.busyErr)})
		case g.queueErr != nil:
			problems = append(problems, Problem{Source: p.problemName(), Err: g.queueErr})
		case g.busyErr != nil:
			problems = append(problems, Problem{Source: p.problemName(), Err: g.busyErr})
		}
		if p.site != "" {
			continue
		}
		queueOK = queueOK && g.queueErr == nil
		busyOK = busyOK && g.busyErr == nil
		queue += g.queue
		busy = max(busy, g.busy)
		reached += g.reached
		reachedOK = reachedOK && g.reachedOK
	}
	apply := func(s *Sample) {
		if queueOK {
			s.Values[PHPFPMQueue] = queue
		}
		if busyOK {
			s.Values[PHPFPMBusyRatio] = busy
		}
		if reachedOK {
			s.Values[PHPFPMMaxChildrenReached] = reached
		}
		r.applySites(s, readings, errs)
	}
	if len(problems) > 0 {
		return apply, problems
	}
	return apply, nil
}

// problemName is the pool's Problem.Source: "phpfpm", or "phpfpm NAME".
func (p *fpmPool) problemName() string {
	if p.name == "" {
		return phpfpmSource.Name
	}
	return phpfpmSource.Name + " " + p.name
}

// read reads the pool's page once and derives its figures. An error is a
// page that could not be had or is not the pool's; a figure that cannot
// be derived from a good page has its own error in the reading.
func (p *fpmPool) read(ctx context.Context, now func() time.Time) (fpmReading, error) {
	page, err := p.fetch(ctx)
	if err != nil {
		p.reached.reset()
		return fpmReading{}, err
	}
	var g fpmReading
	g.queue, g.queueErr = p.queue(page)
	g.busy, g.busyErr = p.busyRatio(page)
	g.reached, g.reachedOK = p.reached.update(now(), page.StartTime, page.MaxChildrenReached)
	return g, nil
}

// queue is the pool's listen queue: the kernel's accept queue of its unix
// socket when it has one gearshift knows, else PHP-FPM's own figure, which
// it has only for a TCP socket on Linux (for a unix socket it reports a
// queue of 0 and a "listen queue len" of 0).
func (p *fpmPool) queue(page *fpmPage) (float64, error) {
	switch {
	case p.listen != "" && (!p.ownSocket || page.self > 0):
		q, err := sockdiag.UnixAcceptQueue(p.listen, p.timeout)
		if err != nil {
			return 0, fmt.Errorf("accept queue of %s: %w", p.listen, err)
		}
		return float64(q.Waiting), nil
	case page.ListenQueueLen > 0:
		return float64(page.ListenQueue), nil
	}
	where := p.shown + " is not the pool's own socket (its pm.status_listen?)"
	if p.client != nil {
		where = "the status page is read over HTTP"
	}
	return 0, fmt.Errorf("pool %s listens on a unix socket, whose queue PHP-FPM does not report (PHP bug #80739), and %s: set listen to the pool's socket", page.Pool, where)
}

// busyRatio is the children serving a request, less those serving a
// status page (this read's own, when it is not on pm.status_listen), over
// max_children: configured, or the processes of a static pool.
func (p *fpmPool) busyRatio(page *fpmPage) (float64, error) {
	kids := p.maxKids
	if kids == 0 {
		if page.ProcessManager != "static" {
			return 0, fmt.Errorf("pool %s runs pm = %s: set max_children to its pm.max_children (the status page does not give it)", page.Pool, page.ProcessManager)
		}
		kids = page.TotalProcesses
	}
	if kids <= 0 {
		return 0, fmt.Errorf("pool %s has no processes to be busy", page.Pool)
	}
	busy := max(0, page.ActiveProcesses-page.self)
	return min(1, float64(busy)/float64(kids)), nil
}

// counterRate turns successive readings of a counter into a rate per
// second. A counter that went down, or a pool started anew (its start
// time changed: php-fpm restarted or reloaded), is a fresh baseline.
type counterRate struct {
	last    uint64
	lastAt  time.Time
	started int64
	primed  bool
}

// update feeds the counter read at t from a pool started at started, and
// returns the rate since the last reading; false when this is a baseline.
func (c *counterRate) update(t time.Time, started int64, v uint64) (float64, bool) {
	prev := *c
	if prev.primed && !t.After(prev.lastAt) {
		return 0, false
	}
	ok := prev.primed && started == prev.started && v >= prev.last
	rate := 0.0
	if ok {
		rate = float64(v-prev.last) / t.Sub(prev.lastAt).Seconds()
	}
	*c = counterRate{last: v, lastAt: t, started: started, primed: true}
	return rate, ok
}

func (c *counterRate) reset() { *c = counterRate{} }

// reach reads every pool once for `config check`: a page that is not the
// pool's (not PHP-FPM's, another pool's, a wrong status path, a socket
// refused for want of permission) is a problem of the config; a pool not
// answering now (php-fpm stopped) is absent. A figure the page cannot
// give is a problem too.
func (r *PHPFPM) reach(ctx context.Context, problem, absent func(key, format string, args ...any)) {
	var wg sync.WaitGroup
	type result struct {
		page *fpmPage
		err  error
	}
	results := make([]result, len(r.pools))
	for i, p := range r.pools {
		wg.Go(func() {
			page, err := p.fetch(ctx)
			results[i] = result{page, err}
		})
	}
	wg.Wait()
	for i, p := range r.pools {
		page, err := results[i].page, results[i].err
		if err != nil {
			if isAbsent(err) {
				absent(p.key, "%v", err)
			} else {
				problem(p.key, "%v", err)
			}
			continue
		}
		if _, err := p.queue(page); err != nil {
			problem(p.key+".listen", "%v", err)
		}
		if _, err := p.busyRatio(page); err != nil {
			problem(p.key+".max_children", "%v", err)
		}
	}
}

// absentError is a pool that does not answer now (php-fpm stopped: no
// socket, nothing listening, no answer in time) rather than one set wrong.
type absentError struct{ error }

func (e absentError) Unwrap() error { return e.error }

func isAbsent(err error) bool {
	var a absentError
	return errors.As(err, &a)
}

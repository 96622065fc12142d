package sensor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/internal/capbuf"
)

// counter is one varnishstat counter the source reads: where its reading
// goes in VarnishCounters, where its rate (or, for a gauge, its level)
// goes in VarnishRates, the signal that rate is, if any, and the flight
// recorder's column it is written in, if any. The table drives
// varnishstat's arguments, the parsing, the restart detection, the rates,
// their sum over the targets, the signals and the recorded columns: a new
// counter is a row here (and its fields in the two structs).
type counter struct {
	field  string                         // varnishstat's name
	value  func(*VarnishCounters) *uint64 // where the reading goes
	rate   func(*VarnishRates) *float64   // where its rate goes; nil: none (the uptime)
	gauge  bool                           // a level, not a count: its rate is the level now, and it may go down
	signal string                         // the signal its rate is; "": none
	record string                         // the history's column of its rate (RecordedRates); "": not recorded
}

var counters = []counter{
	{field: "MAIN.uptime", value: func(c *VarnishCounters) *uint64 { return &c.Uptime }},
	{field: "MAIN.client_req", value: func(c *VarnishCounters) *uint64 { return &c.ClientReq },
		rate: func(r *VarnishRates) *float64 { return &r.ClientRPS }, signal: state.ClientRPS},
	{field: "MAIN.backend_req", value: func(c *VarnishCounters) *uint64 { return &c.BackendReq },
		rate: func(r *VarnishRates) *float64 { return &r.BackendRPS }, signal: BackendRPS},
	{field: "MAIN.backend_fail", value: func(c *VarnishCounters) *uint64 { return &c.BackendFail },
		rate: func(r *VarnishRates) *float64 { return &r.BackendFailRPS }, signal: BackendFailRPS},
	{field: "MAIN.sess_dropped", value: func(c *VarnishCounters) *uint64 { return &c.SessDropped },
		rate: func(r *VarnishRates) *float64 { return &r.DroppedRPS }, signal: DroppedRPS},
	{field: "MAIN.sess_queued", value: func(c *VarnishCounters) *uint64 { return &c.SessQueued },
		rate: func(r *VarnishRates) *float64 { return &r.QueuedRPS }},
	{field: "MAIN.thread_queue_len", value: func(c *VarnishCounters) *uint64 { return &c.ThreadQueueLen },
		rate: func(r *VarnishRates) *float64 { return &r.QueueLen }, gauge: true, signal: QueueLen},
	{field: "MAIN.cache_hit", value: func(c *VarnishCounters) *uint64 { return &c.CacheHit },
		rate: func(r *VarnishRates) *float64 { return &r.CacheHitRPS }, record: "hit_rps"},
	{field: "MAIN.cache_miss", value: func(c *VarnishCounters) *uint64 { return &c.CacheMiss },
		rate: func(r *VarnishRates) *float64 { return &r.CacheMissRPS }, record: "miss_rps"},
	{field: "MAIN.s_pass", value: func(c *VarnishCounters) *uint64 { return &c.Pass },
		rate: func(r *VarnishRates) *float64 { return &r.PassRPS }, record: "pass_rps"},
}

// RecordedRates are the flight recorder's columns of Varnish's rates, in
// the order of the counters: the rows with a record column. The recorder
// and the trace reader call it for every record: the slice is made once,
// and callers must not change it.
func RecordedRates() []string { return recordedRates }

var recordedRates = func() []string {
	var cols []string
	for _, c := range counters {
		if c.record != "" {
			cols = append(cols, c.record)
		}
	}
	return cols
}()

// Recorded returns the rates the flight recorder writes, by column
// (RecordedRates).
func (r VarnishRates) Recorded() map[string]float64 {
	m := map[string]float64{}
	for _, c := range counters {
		if c.record != "" {
			m[c.record] = *c.rate(&r)
		}
	}
	return m
}

// guestReqField are the requests heavy sends the gearshift daemon for
// guest pages (profiles.guest_pages), one counter per loaded VCL that has
// the backend: not the site's backend, so not in BackendReq.
const guestReqField = "VBE.*.gearshift_guest.req"

// VarnishCounters is one reading of a varnishd's traffic counters. All but
// ThreadQueueLen only ever grow while varnishd's cache process runs; a
// restart sets them back to zero.
type VarnishCounters struct {
	Uptime         uint64 // MAIN.uptime: seconds the cache process has been running
	ClientReq      uint64 // MAIN.client_req: good client requests received
	BackendReq     uint64 // MAIN.backend_req less the asks to the gearshift daemon: requests to the site's backend
	BackendFail    uint64 // MAIN.backend_fail: backend connection failures
	SessDropped    uint64 // MAIN.sess_dropped: sessions dropped for want of a thread
	SessQueued     uint64 // MAIN.sess_queued: sessions queued for a thread
	ThreadQueueLen uint64 // MAIN.thread_queue_len (a gauge): sessions waiting for a thread now
	CacheHit       uint64 // MAIN.cache_hit: client requests answered from the cache (grace hits included)
	CacheMiss      uint64 // MAIN.cache_miss: client requests not found in the cache
	Pass           uint64 // MAIN.s_pass: client requests passed to the backend
	// Busy are the VBE.*.busy counters of the site's backend in each
	// loaded VCL, by name: fetches refused at its .max_connections.
	Busy map[string]uint64
}

// Varnishstat reads one varnishd's counters by running varnishstat against
// its working directory (varnishd's -n). It is bounded: the command gets
// Timeout and its output is cut off at MaxOutput bytes.
type Varnishstat struct {
	Name      string        // varnishd's -n: an instance name or a working directory
	Binary    string        // the varnishstat program; "varnishstat" on PATH when empty
	Timeout   time.Duration // default 2s
	MaxOutput int           // bytes of output accepted; default 64 KiB
}

const (
	defaultVarnishstatTimeout = 2 * time.Second
	defaultVarnishstatOutput  = 64 << 10
)

// Read runs varnishstat once and returns the counters.
func (v *Varnishstat) Read(ctx context.Context) (VarnishCounters, error) {
	out, err := v.run(ctx)
	if err != nil {
		return VarnishCounters{}, err
	}
	c, err := parseVarnishstat(out)
	if err != nil {
		return VarnishCounters{}, fmt.Errorf("parse varnishstat -n %s: %w", v.Name, err)
	}
	return c, nil
}

func (v *Varnishstat) run(ctx context.Context) ([]byte, error) {
	timeout, limit := v.Timeout, v.MaxOutput
	if timeout <= 0 {
		timeout = defaultVarnishstatTimeout
	}
	if limit <= 0 {
		limit = defaultVarnishstatOutput
	}
	bin := v.Binary
	if bin == "" {
		bin = "varnishstat"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// -t 0: fail at once when varnishd is not running, instead of retrying
	// the shared-memory attach for varnishstat's default five seconds.
	args := []string{"-j", "-1", "-t", "0", "-n", v.Name}
	for _, c := range counters {
		args = append(args, "-f", c.field)
	}
	args = append(args, "-f", guestReqField, "-f", busyField)
	cmd := exec.CommandContext(ctx, bin, args...)
	stdout := &capbuf.Buffer{Max: limit, Overflow: cancel}
	stderr := &capbuf.Buffer{Max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case stdout.Overflowed():
		return nil, fmt.Errorf("run varnishstat -n %s: output exceeds %d bytes", v.Name, limit)
	case ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("run varnishstat -n %s: no answer within %s", v.Name, timeout)
	case err != nil:
		msg := strings.TrimSpace(firstLine(stderr.String()))
		if msg == "" {
			msg = strings.TrimSpace(firstLine(stdout.String()))
		}
		if msg != "" {
			return nil, fmt.Errorf("run varnishstat -n %s: %w: %s", v.Name, err, msg)
		}
		return nil, fmt.Errorf("run varnishstat -n %s: %w", v.Name, err)
	}
	return stdout.Bytes(), nil
}

// parseVarnishstat parses the output of varnishstat -j. Varnish 6.5 and
// later wrap the counters in {"version": 1, "counters": {...}}; earlier
// versions put them at the top level beside "timestamp". A counter that is
// not in the output is an error: every one of them exists in every Varnish
// since 4.0, so its absence means the output is not what was asked for.
func parseVarnishstat(b []byte) (VarnishCounters, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return VarnishCounters{}, fmt.Errorf("not JSON: %w", err)
	}
	values := top
	if raw, ok := top["version"]; ok {
		var version int
		if err := json.Unmarshal(raw, &version); err != nil || version != 1 {
			return VarnishCounters{}, fmt.Errorf("unknown format version %s", raw)
		}
		if err := json.Unmarshal(top["counters"], &values); err != nil {
			return VarnishCounters{}, errors.New(`no "counters" object`)
		}
	}
	var c VarnishCounters
	for _, ctr := range counters {
		name := ctr.field
		raw, ok := values[name]
		if !ok {
			return VarnishCounters{}, fmt.Errorf("no counter %s", name)
		}
		var field struct {
			Value *uint64 `json:"value"`
		}
		if err := json.Unmarshal(raw, &field); err != nil || field.Value == nil {
			return VarnishCounters{}, fmt.Errorf("counter %s has no unsigned integer value", name)
		}
		*ctr.value(&c) = *field.Value
	}
	c.Busy = parseBusy(values)
	// The daemon's guest-page asks (a VCL discarded takes its counter
	// with it: the next reading's rate counts those asks once).
	for name, raw := range values {
		if !strings.HasPrefix(name, "VBE.") || !strings.HasSuffix(name, ".gearshift_guest.req") {
			continue
		}
		var field struct {
			Value uint64 `json:"value"`
		}
		if json.Unmarshal(raw, &field) == nil {
			c.BackendReq -= min(field.Value, c.BackendReq)
		}
	}
	return c, nil
}

// VarnishRates are the per-second rates derived from two readings of one
// varnishd's counters, and its queue now.
type VarnishRates struct {
	ClientRPS      float64 // client_rps
	BackendRPS     float64 // backend_rps
	BackendFailRPS float64 // backend_fail_rps
	DroppedRPS     float64 // dropped_rps: sessions dropped per second
	QueuedRPS      float64 // sessions queued per second
	QueueLen       float64 // queue_len: MAIN.thread_queue_len now
	CacheHitRPS    float64 // client requests answered from the cache per second
	CacheMissRPS   float64 // client requests not found in the cache per second
	PassRPS        float64 // client requests passed to the backend per second
	// BusyRPS are the fetches refused at a backend's connection limit per
	// second of the poll, Busy the same as a count; the reader averages
	// them over fast_window (backend_busy).
	BusyRPS float64
	Busy    float64
}

// staleAfter is how long MAIN.uptime may stand still before the counters
// count as stale. varnishstat reads the shared memory varnishd leaves
// behind even after varnishd died; only the uptime not moving tells.
const staleAfter = 5 * time.Second

// ErrBaseline is Update's answer to a reading with nothing to compare with:
// the first one, or the first after varnishd restarted.
var ErrBaseline = errors.New("no earlier reading to compare with")

// CounterRates turns successive readings of one varnishd's counters into
// rates. A restart of varnishd (its uptime or a counter went down) makes
// the reading a fresh baseline instead of a spike.
type CounterRates struct {
	last    VarnishCounters
	lastAt  time.Time
	movedAt time.Time // when Uptime last went up
	primed  bool
}

// Update feeds the counters read at t and returns the rates since the
// previous reading. It fails with ErrBaseline when there is no previous
// reading to compare with (the first, the first after a restart, or one not
// later than the previous), and with another error when the uptime has not
// moved for a while: the counters are a dead varnishd's.
func (r *CounterRates) Update(t time.Time, c VarnishCounters) (VarnishRates, error) {
	prev, prevAt, primed := r.last, r.lastAt, r.primed
	dt := t.Sub(prevAt).Seconds()
	if primed && dt <= 0 {
		return VarnishRates{}, ErrBaseline
	}
	r.last, r.lastAt, r.primed = c, t, true
	if !primed || c.wentDown(&prev) {
		r.movedAt = t
		return VarnishRates{}, ErrBaseline
	}
	if c.Uptime > prev.Uptime {
		r.movedAt = t
	} else if still := t.Sub(r.movedAt); still >= staleAfter {
		return VarnishRates{}, fmt.Errorf("varnishd's uptime has not moved for %s: it is not running", still.Round(time.Second))
	}
	var rates VarnishRates
	for _, ctr := range counters {
		if ctr.rate == nil {
			continue
		}
		now, then := *ctr.value(&c), *ctr.value(&prev)
		if ctr.gauge {
			*ctr.rate(&rates) = float64(now)
		} else {
			*ctr.rate(&rates) = float64(now-then) / dt
		}
	}
	rates.Busy = float64(busySince(prev.Busy, c.Busy))
	rates.BusyRPS = rates.Busy / dt
	return rates, nil
}

// wentDown tells whether a count of c is lower than in prev: the cache
// process restarted (a gauge may go down at any time).
func (c *VarnishCounters) wentDown(prev *VarnishCounters) bool {
	for _, ctr := range counters {
		if !ctr.gauge && *ctr.value(c) < *ctr.value(prev) {
			return true
		}
	}
	return false
}

// shares are hit_ratio and backend_share: the poll's client requests
// answered from the cache, and its backend requests, over its client
// requests. None without client requests, nor when the backend had more:
// Varnish counts the client requests of a busy keep-alive connection only
// when it lets the connection go, so such a poll's client count is late,
// and a share of it would say the cache does nothing.
func (r VarnishRates) shares() (hit, backend float64, ok bool) {
	if r.ClientRPS <= 0 || r.BackendRPS > r.ClientRPS {
		return 0, 0, false
	}
	return min(1, r.CacheHitRPS/r.ClientRPS), r.BackendRPS / r.ClientRPS, true
}

// Reset forgets the baseline; the next Update primes it again.
func (r *CounterRates) Reset() { *r = CounterRates{} }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// The signals of the varnishstat source (state.ClientRPS is the first).
const (
	BackendRPS     = "backend_rps"
	BackendFailRPS = "backend_fail_rps"
	DroppedRPS     = "dropped_rps"
	QueueLen       = "queue_len"
	HitRatio       = "hit_ratio"
	BackendShare   = "backend_share"
)

var varnishSource = Source{
	Name: "varnishstat",
	Key:  "varnish.targets[].name",
	Signals: []state.Signal{
		{
			Name: state.ClientRPS, Unit: "rps", Direction: state.Rises, Precision: 0,
			Help:       "Varnish client requests per second, summed over the local targets (varnish.targets[].name).",
			Metric:     "gearshift_client_requests_per_second",
			StatusLine: "varnish", StatusPart: "client",
		},
		{
			Name: BackendRPS, Unit: "rps", Direction: state.Rises, Precision: 0, Backend: true,
			Help:       "Varnish backend requests per second, summed over the local targets (varnish.targets[].name).",
			Metric:     "gearshift_backend_requests_per_second",
			StatusLine: "varnish", StatusPart: "backend",
		},
		{
			Name: BackendFailRPS, Unit: "rps", Direction: state.Rises, Precision: 1, Backend: true,
			Help:       "Varnish backend connection failures per second.",
			Metric:     "gearshift_backend_failures_per_second",
			StatusLine: "varnish", StatusPart: "backend fail",
		},
		{
			Name: DroppedRPS, Unit: "rps", Direction: state.Rises, Precision: 1,
			Bound:      state.AboveZero,
			Help:       "Varnish sessions dropped for want of a worker thread, per second.",
			Metric:     "gearshift_dropped_sessions_per_second",
			StatusLine: "varnish", StatusPart: "dropped",
		},
		{
			Name: QueueLen, Direction: state.Rises, Precision: 0,
			Help:       "Varnish sessions waiting for a worker thread (MAIN.thread_queue_len).",
			Metric:     "gearshift_queue_length",
			StatusLine: "varnish", StatusPart: "queue",
		},
		{
			Name: BackendBusy, Unit: "rps", Direction: state.Rises, Precision: 1,
			Bound: state.AboveZero, AtOnce: true, Backend: true,
			Help:       "Fetches Varnish refused at the backend's connection limit (VBE.*.busy), per second over the last fast_window.",
			Metric:     "gearshift_backend_busy_per_second",
			StatusLine: "varnish", StatusPart: "busy",
		},
		{
			// The cache doing less for the site is worse: the signal
			// falls with pressure.
			Name: HitRatio, Direction: state.Falls, Precision: 2, Max: 1,
			Help:       "Client requests answered from the cache over client requests, over the poll (0 to 1).",
			Metric:     "gearshift_hit_ratio",
			StatusLine: "cache", StatusPart: "hits",
		},
		{
			Name: BackendShare, Direction: state.Rises, Precision: 2, Max: 1,
			Help:       "Backend requests over client requests, over the poll (0 to 1; unknown when the backend had more: late client counts).",
			Metric:     "gearshift_backend_share",
			StatusLine: "cache", StatusPart: "to the backend",
		},
	},
	// The backend refusing fetches at its connection limit is a surge
	// already at the door: the gear is entered on the first sample (a
	// signal of state.Signal.AtOnce), where load takes up_confirm
	// samples. Twenty refusals within fast_window's 10 s is heavy, five
	// moderate: a quiet machine refuses none. Each gear stays while a
	// quarter of its entry's refusals go on (then down_window and
	// min_dwell, as for every rule).
	// A gear added to state.All after Heavy fails to compile here until
	// it has its rule; one added between, TestGearRows.
	Rules: [...]state.Band{
		state.Light:    {},
		state.Moderate: {Enter: state.Rule{BackendBusy: 0.5}, Stay: state.Rule{BackendBusy: 0.1}},
		state.Heavy:    {Enter: state.Rule{BackendBusy: 2}, Stay: state.Rule{BackendBusy: 0.5}},
	},
	On: func(cfg HostConfig) bool { return len(cfg.Varnish) > 0 },
	Open: func(cfg HostConfig) (Reader, error) {
		r := &varnishReader{busy: busyWindow{Window: cfg.FastWindow}}
		for _, name := range cfg.Varnish {
			r.targets = append(r.targets, &varnishTarget{stat: Varnishstat{Name: name}})
		}
		return r, nil
	},
}

// varnishReader reads every local target's counters and sums their rates.
type varnishReader struct {
	targets []*varnishTarget
	busy    busyWindow // backend_busy over fast_window
}

type varnishTarget struct {
	stat  Varnishstat
	rates CounterRates
}

// SourceVarnish is the Problem.Source of the varnishd named name.
func SourceVarnish(name string) string {
	if name == "" {
		return "varnishstat (the default instance)"
	}
	return "varnishstat " + name
}

// Read implements Reader. Any target without rates (failing, or just
// primed) makes the sum unknown, since a partial sum would look like the
// traffic fell.
func (r *varnishReader) Read(ctx context.Context) (func(*Sample), error) {
	rates := make([]*VarnishRates, len(r.targets))
	errs := make([]error, len(r.targets))
	var wg sync.WaitGroup
	for i, t := range r.targets {
		wg.Go(func() { rates[i], errs[i] = t.read(ctx) })
	}
	wg.Wait()
	var problems Problems
	for i, err := range errs {
		if err != nil && !errors.Is(err, ErrBaseline) {
			problems = append(problems, Problem{Source: SourceVarnish(r.targets[i].stat.Name), Err: err})
		}
	}
	if len(problems) > 0 {
		r.busy.reset()
		return nil, problems
	}
	sum := sumTraffic(rates)
	if sum == nil {
		return nil, nil
	}
	busy := r.busy.add(time.Now(), sum.Busy, sum.BusyRPS)
	return func(s *Sample) {
		s.Values[BackendBusy] = busy
		s.Varnish = sum
		for _, ctr := range counters {
			if ctr.signal != "" {
				s.Values[ctr.signal] = *ctr.rate(sum)
			}
		}
		if hit, backend, ok := sum.shares(); ok {
			s.Values[HitRatio], s.Values[BackendShare] = hit, backend
		}
	}, nil
}

func (t *varnishTarget) read(ctx context.Context) (*VarnishRates, error) {
	c, err := t.stat.Read(ctx)
	if err != nil {
		t.rates.Reset()
		return nil, err
	}
	r, err := t.rates.Update(time.Now(), c)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// sumTraffic adds the targets' rates up; nil when any target has none.
func sumTraffic(rates []*VarnishRates) *VarnishRates {
	var sum VarnishRates
	for _, r := range rates {
		if r == nil {
			return nil
		}
		for _, ctr := range counters {
			if ctr.rate != nil {
				*ctr.rate(&sum) += *ctr.rate(r)
			}
		}
		sum.Busy += r.Busy
		sum.BusyRPS += r.BusyRPS
	}
	return &sum
}

package sensor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
)

// BackendHealthy is the signal of the backend health source: 1 while
// every target's probe of the backend (backend.probe) finds it healthy.
const BackendHealthy = "backend_healthy"

// ProbeBackend is the name of the backend the rendered profiles declare
// for the health probe alone.
const ProbeBackend = "gearshift_probe"

// AdminTarget is a Varnish target's admin port, for sources that ask
// varnishd itself.
type AdminTarget struct {
	Addr       string // varnishd -T
	SecretFile string // varnishd -S
}

var healthSource = Source{
	Name: "backend_health",
	Key:  "backend.probe",
	Signals: []state.Signal{{
		Name: BackendHealthy, Direction: state.Falls, Precision: 0, Max: 1,
		Help:       "1 while Varnish's health probe finds the backend healthy on every target, 0 when it is sick on any (backend.probe).",
		Metric:     "gearshift_backend_healthy",
		StatusLine: "backend", StatusPart: "healthy",
	}},
	On: func(cfg HostConfig) bool { return cfg.BackendProbe && len(cfg.Admins) > 0 },
	Open: func(cfg HostConfig) (Reader, error) {
		r := &healthReader{}
		for _, t := range cfg.Admins {
			c, err := varnishadm.NewFromFile(t.Addr, t.SecretFile)
			if err != nil {
				return nil, fmt.Errorf("backend health of %s: %w", t.Addr, err)
			}
			r.clients = append(r.clients, c)
		}
		return r, nil
	},
}

// healthReader asks every target for its probe backends' health, off the
// poll: a Read returns the last answer at once and asks again a little
// later, so that the daemon's own work is never running when the
// machine's run queue is sampled (it would count as load).
type healthReader struct {
	clients []*varnishadm.Client

	mu     sync.Mutex
	asking bool
	apply  func(*Sample)
	err    error
}

// healthDelay is how long after a poll the targets are asked.
const healthDelay = 300 * time.Millisecond

// Read implements Reader: the last answer (none before the first).
func (r *healthReader) Read(ctx context.Context) (func(*Sample), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.asking {
		r.asking = true
		time.AfterFunc(healthDelay, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			apply, err := r.ask(ctx)
			r.mu.Lock()
			r.apply, r.err, r.asking = apply, err, false
			r.mu.Unlock()
		})
	}
	return r.apply, r.err
}

// SourceHealth is the Problem.Source of the target at addr.
func SourceHealth(addr string) string { return "backend health " + addr }

// ask reads every target: 0 when any target's probe says sick, 1 when all
// say healthy, unknown when a target cannot tell.
func (r *healthReader) ask(ctx context.Context) (func(*Sample), error) {
	healthy := make([]bool, len(r.clients))
	errs := make([]error, len(r.clients))
	var wg sync.WaitGroup
	for i, c := range r.clients {
		wg.Go(func() {
			out, err := c.Run(ctx, "backend.list", "-j", "*."+ProbeBackend)
			if err == nil {
				healthy[i], err = parseProbeHealth(out)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var problems Problems
	for i, err := range errs {
		if err != nil {
			problems = append(problems, Problem{Source: SourceHealth(r.clients[i].Addr()), Err: err})
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	v := 1.0
	for _, h := range healthy {
		if !h {
			v = 0
		}
	}
	return func(s *Sample) { s.Values[BackendHealthy] = v }, nil
}

// errNoProbe: the target has no probe backend loaded (a vcl_file of the
// operator's own, or the profiles not loaded yet).
var errNoProbe = errors.New("no " + ProbeBackend + " backend loaded: the profiles' probe is not running")

// parseProbeHealth reads the answer of backend.list -j: healthy when any
// loaded VCL's probe backend is (they all probe the same backend; a VCL
// loaded a moment ago has not probed yet).
func parseProbeHealth(out string) (bool, error) {
	var doc []json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc) < 4 {
		return false, fmt.Errorf("backend.list -j: not the JSON Varnish writes")
	}
	var backends map[string]struct {
		Probe []json.RawMessage `json:"probe_message"`
	}
	if err := json.Unmarshal(doc[3], &backends); err != nil {
		return false, fmt.Errorf("backend.list -j: %v", err)
	}
	found := false
	for name, b := range backends {
		if !strings.HasSuffix(name, "."+ProbeBackend) || len(b.Probe) < 3 {
			continue
		}
		found = true
		var verdict string
		if json.Unmarshal(b.Probe[2], &verdict) == nil && verdict == "healthy" {
			return true, nil
		}
	}
	if !found {
		return false, errNoProbe
	}
	return false, nil
}

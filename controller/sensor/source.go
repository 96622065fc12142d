package sensor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gearshift/gearshift/controller/state"
)

// Source is one row of Sources: a place signals come from, declared in one
// value beside its reader. Everything that deals in signals (the config's
// rule validation, "is this signal's source configured", status, perfdata,
// metrics, trace columns, logs) reads the rows, so a new source is a file
// declaring its row, its block in Config when it has one, and a line in
// Sources; TestSourcesCoverConfig fails when the line is forgotten.
type Source struct {
	// Name is what logs and problems call the source ("apache_status").
	Name string
	// Key is the config key that turns the source on
	// ("sensor.apache_status"); "" for one that is always on.
	Key string
	// Signals are the signals the source adds to the set, in order.
	Signals []state.Signal
	// Named returns the signals the user names in cfg (after Signals),
	// when the source is on; nil for a source without such.
	Named func(cfg HostConfig) []state.Signal
	// Overrides names signals of an earlier row whose figures this
	// source's replace when it is on; when it fails, they are unknown.
	Overrides []string
	// Rules are conditions the source adds to the default rules of each
	// gear (by state; light's unused) while it is on. A rule the config
	// file gives replaces them with the rest of that rule's defaults.
	Rules [len(state.All)]state.Band
	// On tells whether cfg turns the source on.
	On func(cfg HostConfig) bool
	// Check reports what is wrong with the source's settings in cfg; nil
	// when there is nothing to check.
	Check func(cfg HostConfig, problem func(key, format string, args ...any))
	// Files returns the files cfg names for the source, by config key,
	// which must be readable on the machine the daemon runs on; nil for
	// none.
	Files func(cfg HostConfig) map[string]string
	// Open returns the reader of a source that is on. nil: the source is
	// read by the Host itself (the machine's vitals).
	Open func(cfg HostConfig) (Reader, error)
	// Reach reads a source that is on once, for `config check`: what
	// only an answer tells (a page that is not the source's, a socket
	// refused). problem reports a fault of the config; absent a source
	// not answering now (its server stopped), which the daemon rides out
	// as unavailable. nil: nothing to ask.
	Reach func(ctx context.Context, cfg HostConfig, problem, absent func(key, format string, args ...any))
}

// Sources are the rows, in the order of the signal set after the machine's
// own signal.
var Sources = []*Source{
	&vitalsSource,
	&cgroupSource,
	&varnishSource,
	&apacheSource,
	&probeSource,
	&injectSource,
	&healthSource,
	&phpfpmSource,
	&prometheusSource,
}

// A Reader reads one source once per poll, beside the other readers and
// the machine's vitals. apply writes what it read into the sample; it is
// called after every read has finished, in the order of Sources. A reader
// with nothing to report this time (a first reading, kept as a baseline)
// returns a nil apply and no error. An error of type Problems names several
// failing parts of the source; an apply beside it writes what the other
// parts read.
type Reader interface {
	Read(ctx context.Context) (apply func(*Sample), err error)
}

// Config is the `sensor:` block of gearshift's config: the settings of the
// optional sources that live there. The zero value turns them all off.
type Config struct {
	// Cgroup is a cgroup v2 (a path under /sys/fs/cgroup, or absolute)
	// whose pressure and memory replace the machine's psi_cpu, psi_mem and
	// mem_available_pct. "": the machine's.
	Cgroup string `yaml:"cgroup"`
	// ApacheStatus is the URL of Apache's mod_status page
	// (server-status?auto): apache_busy_ratio. "": off.
	ApacheStatus string      `yaml:"apache_status"`
	Probe        ProbeConfig `yaml:"probe"`
	// InjectFile holds a number that something else writes: injected.
	// "": off; a missing file is no value.
	InjectFile string           `yaml:"inject_file"`
	Prometheus PrometheusConfig `yaml:"prometheus"`
	PHPFPM     PHPFPMConfig     `yaml:"phpfpm"`
}

// HostConfig is what a Host is built from: the sensor block, and the
// settings elsewhere in the config that sources read.
type HostConfig struct {
	CPUs    int      // > 0 overrides the detected CPUs (cgroup quota, else logical CPUs)
	Varnish []string // varnishd -n names of local targets (varnish.targets[].name)
	Sensor  Config
	// Admins are the targets' admin ports, and BackendProbe whether the
	// profiles probe the backend (backend.probe.url is set).
	Admins       []AdminTarget
	BackendProbe bool
	// SitePools maps each sensor.phpfpm.pools name a site gives as its
	// phpfpm_pool to that site: the pool is read for the site alone, out
	// of the server's phpfpm signals.
	SitePools map[string]string
	// FastWindow is fast_window: what backend_busy averages over.
	FastWindow time.Duration
}

// Signals returns the signal set of cfg: the machine's own signal, then the
// signals of every source in the order of Sources, each carrying its
// source's key. A signal of a source that is off is in the set (status
// shows it unavailable); a rule on it is refused (see Unsourced).
func Signals(cfg HostConfig) (*state.Set, error) {
	groups := [][]state.Signal{state.Builtin}
	for _, src := range Sources {
		g := slices.Clone(src.Signals)
		if src.Named != nil && src.On(cfg) {
			g = append(g, src.Named(cfg)...)
		}
		for i := range g {
			g[i].Source = src.Key
		}
		groups = append(groups, g)
	}
	return state.NewSet(groups...)
}

// Unsourced returns the source that declares the signal name when cfg does
// not turn it on: a rule on the signal could never hold. A signal no
// source declares (the machine's own) is never unsourced.
func Unsourced(cfg HostConfig, name string) (*Source, bool) {
	for _, src := range Sources {
		for _, s := range src.Signals {
			if s.Name == name {
				return src, !src.On(cfg)
			}
		}
	}
	return nil, false
}

// builtinName tells whether name is a signal of the machine or of a
// source's declaration: a name the user may not give a signal.
func builtinName(name string) bool {
	for _, s := range state.Builtin {
		if s.Name == name {
			return true
		}
	}
	for _, src := range Sources {
		for _, s := range src.Signals {
			if s.Name == name {
				return true
			}
		}
	}
	return false
}

// Files returns the files the configured sources name, by config key.
func Files(cfg HostConfig) map[string]string {
	files := map[string]string{}
	for _, src := range Sources {
		if src.Files != nil && src.On(cfg) {
			maps.Copy(files, src.Files(cfg))
		}
	}
	return files
}

// Check reports what is wrong with the sources' settings in cfg.
func Check(cfg HostConfig, problem func(key, format string, args ...any)) {
	for _, src := range Sources {
		if src.Check != nil {
			src.Check(cfg, problem)
		}
	}
}

// Reach reads each source that cfg turns on and that has something to
// ask once (see Source.Reach), all at once, within ctx.
func Reach(ctx context.Context, cfg HostConfig, problem, absent func(key, format string, args ...any)) {
	type report struct {
		absent   bool
		key, msg string
	}
	var mu sync.Mutex
	var reports []report
	add := func(absent bool) func(key, format string, args ...any) {
		return func(key, format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, report{absent, key, fmt.Sprintf(format, args...)})
		}
	}
	var wg sync.WaitGroup
	for _, src := range Sources {
		if src.Reach != nil && src.On(cfg) {
			wg.Go(func() { src.Reach(ctx, cfg, add(false), add(true)) })
		}
	}
	wg.Wait()
	slices.SortStableFunc(reports, func(a, b report) int { return strings.Compare(a.key, b.key) })
	for _, r := range reports {
		if r.absent {
			absent(r.key, "%s", r.msg)
		} else {
			problem(r.key, "%s", r.msg)
		}
	}
}

// Problem is an optional source that failed during one sample.
type Problem struct {
	Source string // Source.Name, or a part of it ("varnishstat www")
	Err    error
}

// String describes the problem for a log line.
func (p Problem) String() string { return fmt.Sprintf("%s: %v", p.Source, p.Err) }

// Problems is a reader's error naming several failing parts of its source.
type Problems []Problem

func (ps Problems) Error() string {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = errors.New(p.String())
	}
	return errors.Join(errs...).Error()
}

// on returns an On that is true when the setting read from cfg is set.
func on(setting func(HostConfig) string) func(HostConfig) bool {
	return func(cfg HostConfig) bool { return setting(cfg) != "" }
}

// parseHTTPURL parses the http or https URL of a source's setting; what
// names the setting and want shows its form in the error, which never
// shows a password.
func parseHTTPURL(raw, what, want string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := raw
		if err == nil {
			shown = u.Redacted()
		}
		return nil, fmt.Errorf("%s %q: want %s", what, shown, want)
	}
	return u, nil
}

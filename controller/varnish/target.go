// Package varnish keeps Varnish admin ports on the profile of the gear in
// force: one Target per port loads gearshift's profiles, switches (or
// labels) the one of the gear the loop asks for, discards stale ones, and
// retries a failing port with backoff.
package varnish

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/api"
	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/varnishadm"
	"github.com/gearshift/gearshift/profiles"
)

// Backoff bounds of the retries against a failing target.
const (
	minBackoff = 500 * time.Millisecond
	MaxBackoff = 10 * time.Second
)

// compileTimeout is the least time a profile load is given: compiling a
// VCL takes far longer than anything else Varnish is asked.
const compileTimeout = 30 * time.Second

// Settings are what the config says of every target; a reload changes
// them (Configure).
type Settings struct {
	Mode           string        // varnish.mode
	Timeout        time.Duration // one admin command
	LoadTimeout    time.Duration // one profile load (a compile)
	RefusedBackoff time.Duration // the backoff's cap while the port refuses (0: MaxBackoff)
}

// SettingsOf returns the settings cfg gives every target: varnish.timeout
// (2s when unset) for a command, at least 30s for a load, and a port that
// refuses tried again once a poll.
func SettingsOf(cfg *config.Config) Settings {
	timeout := time.Duration(cfg.Varnish.Timeout)
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return Settings{
		Mode:           cfg.Varnish.Mode,
		Timeout:        timeout,
		LoadTimeout:    max(timeout, compileTimeout),
		RefusedBackoff: max(time.Duration(cfg.PollInterval), minBackoff),
	}
}

// Metrics are the event metrics of one target.
type Metrics struct {
	Errors   prometheus.Counter  // failed attempts to bring it to the gear
	Switches prometheus.Observer // how long a switch took, in seconds
}

// ownName matches the names gearshift gives its profiles; only these are
// ever discarded (a temporary name used by `profiles check` is not).
var ownName = regexp.MustCompile(`^` + regexp.QuoteMeta(profiles.NamePrefix) + `(` + state.OneOf("|") + `)-[0-9a-f]{8}$`)

// ownRouter matches the names gearshift gives its routers (a config with
// sites).
var ownRouter = regexp.MustCompile(`^` + regexp.QuoteMeta(profiles.RouterPrefix) + `[0-9a-f]{8}$`)

// Target keeps one Varnish admin port on the profile of the gear in
// force. Its methods run one at a time: on the loop's goroutine, or on
// the one the loop hands a Sync to; only Ban and Running may run beside
// them.
type Target struct {
	addr, secretFile string
	dial             DialFunc
	metrics          Metrics
	log              *zap.Logger

	mu       sync.Mutex // guards conn and settings for Ban and Running, which run beside the rest
	conn     Admin
	settings Settings

	lastUsed  string // what gearshift last made active (labelled) on this manager
	active    string
	label     string            // what the label gearshift points to (label mode)
	lastSites map[string]string // with sites: what gearshift last pointed each site's label at, by label
	// sitesLoaded names what the last full sync with sites loaded
	// (sitesKey), at listedAt: until sitesRelist after it, a sync in
	// sync relabels without listing.
	sitesLoaded string
	listedAt    time.Time
	foreignAt   time.Time // when gearshift's VCL was last found changed by someone else
	unusedLab   bool      // "no VCL uses the label" was logged
	// reconnected: the client opened a new session (it re-dialled a lost
	// connection) since the last sync that succeeded. A VCL found changed
	// then is put back without calling it foreign: a restarted manager
	// booted with -I (profiles export) runs the exported gear, not the
	// current one.
	reconnected bool
	sessions    int64 // t.conn.Sessions() at the last list
	reachable   bool
	child       string // the cache child's state; "" while unknown
	inSync      bool
	contacted   bool
	lastSwitch  float64 // ms
	err         string

	failures  int
	backoff   time.Duration
	retryAt   time.Time
	downSince time.Time
	noDiscard map[string]bool // discards Varnish refused, not retried
	// plain: this Varnish cannot import varnish-modules; it runs the
	// profiles' Plain twins. Learned from its compiler, tried again once
	// the manager may have changed (a new admin session).
	plain         bool
	plainSessions int64 // t.conn.Sessions() when plain was learned
}

// profiles is set, or its Plain twins for a Varnish without
// varnish-modules.
func (t *Target) profiles(set *profiles.Set) *profiles.Set {
	if t.plain {
		return set.Plain()
	}
	return set
}

// learnPlain reports whether err is this Varnish's compiler refusing
// varnish-modules while the full profiles were tried; the target then
// runs the Plain twins, and says so once.
func (t *Target) learnPlain(err error) bool {
	if t.plain || !profiles.MissingModules(err) {
		return false
	}
	t.plain, t.plainSessions = true, t.conn.Sessions()
	t.log.Warn("varnish-modules (xkey, vsthrottle) are missing in this Varnish: " +
		"its profiles drop a session's pages with bans and keep no client budget (apt install varnish-modules)")
	return true
}

func (t *Target) statusNow(want string) api.TargetStatus {
	err := t.err
	if err == "" && !t.contacted && !t.reachable {
		err = "not contacted yet: the first poll is loading the profiles"
	}
	st := api.TargetStatus{
		Admin:        t.addr,
		Reachable:    t.reachable,
		ActiveVCL:    t.active,
		InSync:       t.inSync && t.active == want,
		LastSwitchMS: t.lastSwitch,
		Child:        t.child,
		Error:        err,
	}
	if t.settings.Mode == config.ModeLabel {
		st.LabelVCL = t.label
		st.InSync = t.inSync && t.label == want
	}
	if !t.foreignAt.IsZero() {
		at := t.foreignAt
		st.ForeignVCLAt = &at
	}
	return st
}

// New returns the target of the admin port addr, whose secret is in
// secretFile. It contacts nothing: the first Sync dials, with dial.
func New(addr, secretFile string, dial DialFunc, s Settings, m Metrics, log *zap.Logger) *Target {
	return &Target{
		addr:       addr,
		secretFile: secretFile,
		dial:       dial,
		metrics:    m,
		log:        log.With(zap.String(logging.FieldTarget, addr)),
		noDiscard:  map[string]bool{},
		settings:   s,
	}
}

// Configure gives the target a reload's settings.
func (t *Target) Configure(s Settings) {
	t.mu.Lock()
	t.settings = s
	t.mu.Unlock()
}

// Settings are the target's settings now.
func (t *Target) Settings() Settings { return t.settings }

// Status is the target's status, in sync when it runs p (or p's Plain
// twin, on a Varnish without varnish-modules).
func (t *Target) Status(p profiles.Profile) api.TargetStatus {
	want := p.Name
	if t.plain {
		plain, _ := p.Plain()
		want = plain.Name
	}
	return t.statusNow(want)
}

// Retry makes the next Sync try at once, backoff or not.
func (t *Target) Retry() { t.retryAt = time.Time{} }

// Fail records a failed attempt made for the target (err): it is retried
// with backoff, and logged with backoff.
func (t *Target) Fail(now time.Time, err error) { t.fail(now, err) }

// Close closes the admin connection.
func (t *Target) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn != nil {
		t.conn.Close()
		t.conn = nil
	}
}

// cmdCtx bounds one admin command.
func (t *Target) cmdCtx(ctx context.Context, compile bool) (context.Context, context.CancelFunc) {
	if compile {
		return context.WithTimeout(ctx, t.settings.LoadTimeout)
	}
	return context.WithTimeout(ctx, t.settings.Timeout)
}

// connect makes sure the target has its admin client. The client is made
// once and kept: it dials on its first command and dials again by itself
// after a lost connection (see Target), so the target never re-dials.
func (t *Target) connect() error {
	if t.conn != nil {
		return nil
	}
	conn, err := t.dial(t.addr, t.secretFile)
	if err != nil {
		return fmt.Errorf("connect to varnish admin %s: %w", t.addr, err)
	}
	t.mu.Lock()
	t.conn, t.sessions = conn, 0
	t.mu.Unlock()
	return nil
}

func (t *Target) fail(now time.Time, err error) {
	if t.failures == 0 {
		t.downSince = now
		t.backoff = minBackoff
	} else if t.backoff *= 2; t.backoff > MaxBackoff {
		t.backoff = MaxBackoff
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) && t.settings.RefusedBackoff > 0 && t.backoff > t.settings.RefusedBackoff:
		// Nothing listens: a manager being restarted. Trying once a poll
		// costs nothing and picks it up as soon as it is back.
		t.backoff = t.settings.RefusedBackoff
	case varnishadm.ChildLost(err):
		// The cache child died under the command (killed, crashed); its
		// manager answers and starts a new one at once: the next poll
		// finds it, and the gear it should serve follows within a poll.
		t.backoff = 0
	}
	t.failures++
	t.metrics.Errors.Inc()
	t.retryAt = now.Add(t.backoff)
	t.inSync = false
	t.err = err.Error()
	if !IsCommandError(err) {
		t.reachable = false
		t.active, t.label, t.child = "", "", ""
	}
	if logging.Worthy(t.failures) {
		t.log.Error("varnish target failing", zap.Error(err), zap.Int(logging.FieldFailures, t.failures),
			zap.Duration(logging.FieldRetryIn, t.backoff))
	}
}

func (t *Target) recover(now time.Time) {
	if t.failures > 0 {
		t.log.Info("varnish reachable again", zap.Int(logging.FieldFailures, t.failures),
			zap.Duration(logging.FieldDownFor, now.Sub(t.downSince).Round(time.Millisecond)))
	}
	t.failures, t.backoff, t.err = 0, 0, ""
}

// IsCommandError reports whether err is one Varnish answered (a rejected
// command, a VCL that does not compile: a *varnishadm.CLIError) or one
// gearshift drew from an answer (errLabelIsVCL), as opposed to a broken
// connection: the target keeps the connection.
func IsCommandError(err error) bool {
	return errors.As(err, new(*varnishadm.CLIError)) || errors.Is(err, errLabelIsVCL)
}

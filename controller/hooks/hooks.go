// Package hooks runs the on_change hooks (hooks.on_change) one at a time,
// in order, off the loop: the loop only queues.
package hooks

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/sdnotify"
	"github.com/gearshift/gearshift/internal/capbuf"
)

// Bounds of the on_change hooks.
const (
	// maxPending is how many gear changes may wait while a hook runs;
	// past it the oldest waiting one is skipped (the latest gear matters).
	maxPending = 8
	// maxOutput is how much of a hook's output (stdout and stderr
	// together) goes into the log.
	maxOutput = 4 << 10
	// StopGrace is how long a stopping daemon lets hooks finish.
	StopGrace = 5 * time.Second
)

// Environment of a hook.
const (
	EnvFrom   = "GEARSHIFT_FROM"
	EnvTo     = "GEARSHIFT_TO"
	EnvReason = "GEARSHIFT_REASON"
	EnvMode   = "GEARSHIFT_MODE" // auto or forced
	// EnvSite is the site that shifted (the config's sites); empty
	// without sites and for a pin of every site.
	EnvSite = "GEARSHIFT_SITE"
	// EnvIncident is the incident's id while the gear is above light
	// and on the step back; EnvSummary, on that step, one line on it.
	EnvIncident = "GEARSHIFT_INCIDENT"
	EnvSummary  = "GEARSHIFT_SUMMARY"
	// EnvAdvice is the last advice of the incident (the daemon's advice):
	// what still reached the backend above light, and what would change it.
	EnvAdvice = "GEARSHIFT_ADVICE"
)

// Event is one run of a hook: the command and everything it is told.
type Event struct {
	Argv     []string
	Timeout  time.Duration
	Site     string // the site that shifted; "" without sites, or for a pin of every site
	From, To string
	Reason   string
	Mode     string   // auto or forced
	Env      []string // more variables: the incident's
}

// Runner runs hooks one at a time, in order, off the loop: the loop
// only queues. A hook's process group is killed at its timeout and when
// the hook exits, so nothing it started outlives it unnoticed.
type Runner struct {
	log    *zap.Logger
	ctx    context.Context // cancelled to kill what runs at stop
	cancel context.CancelFunc

	mu      sync.Mutex
	pending []Event
	running bool
	closed  bool
	idle    chan struct{} // closed when the worker ends; nil while none runs
}

func New(log *zap.Logger) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{log: log, ctx: ctx, cancel: cancel}
}

// Enqueue queues ev and returns at once.
func (h *Runner) Enqueue(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if len(h.pending) >= maxPending {
		old := h.pending[0]
		h.pending = h.pending[1:]
		h.log.Warn("hook skipped: gear changes came faster than the hook runs",
			zap.String(logging.FieldHook, old.Argv[0]), zap.String(logging.FieldFrom, old.From), zap.String(logging.FieldTo, old.To))
	}
	h.pending = append(h.pending, ev)
	if !h.running {
		h.running = true
		h.idle = make(chan struct{})
		go h.work(h.idle)
	}
}

func (h *Runner) work(idle chan struct{}) {
	defer close(idle)
	for {
		h.mu.Lock()
		if len(h.pending) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		ev := h.pending[0]
		h.pending = h.pending[1:]
		h.mu.Unlock()
		h.run(ev)
	}
}

// Close lets the queued hooks run for up to grace, then kills what still
// runs and drops the rest. Hooks queued after close are dropped.
func (h *Runner) Close(grace time.Duration) {
	h.mu.Lock()
	h.closed = true
	idle := h.idle
	h.mu.Unlock()
	defer h.cancel()
	if idle == nil {
		return
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-idle:
		return
	case <-timer.C:
	}
	h.mu.Lock()
	if n := len(h.pending); n > 0 {
		h.log.Warn("stopping: hooks not run", zap.Int(logging.FieldSkipped, n))
		h.pending = nil
	}
	h.mu.Unlock()
	h.cancel()
	<-idle
}

func (h *Runner) run(ev Event) {
	log := h.log.With(zap.String(logging.FieldHook, ev.Argv[0]),
		zap.String(logging.FieldFrom, ev.From), zap.String(logging.FieldTo, ev.To))
	ctx, cancel := context.WithTimeout(h.ctx, ev.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ev.Argv[0], ev.Argv[1:]...)
	// Not the daemon's systemd variables: a hook must not speak for it.
	cmd.Env = append(sdnotify.ChildEnv(os.Environ()),
		EnvFrom+"="+ev.From, EnvTo+"="+ev.To, EnvReason+"="+ev.Reason, EnvMode+"="+ev.Mode, EnvSite+"="+ev.Site)
	cmd.Env = append(cmd.Env, ev.Env...)
	cmd.Dir = "/"
	out := &capbuf.Buffer{Max: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that a timeout takes whatever the hook
	// started (curl under a shell script) with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A process left holding the output pipe does not hold up the runner.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it left behind
	}
	fields := []zap.Field{zap.Float64(logging.FieldDurationMS, math.Round(float64(elapsed.Microseconds())/100)/10),
		zap.String(logging.FieldOutput, output(out))}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil && h.ctx.Err() != nil:
		log.Warn("hook killed: the daemon is stopping", fields...)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		log.Warn("hook timed out and was killed", append(fields, zap.Duration(logging.FieldTimeout, ev.Timeout))...)
	case errors.As(err, &exitErr):
		log.Warn("hook failed", append(fields, zap.Int(logging.FieldExitCode, exitErr.ExitCode()), zap.Error(err))...)
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		log.Error("hook could not run", append(fields, zap.Error(err))...)
	default:
		log.Info("hook ran", append(fields, zap.Int(logging.FieldExitCode, 0))...)
	}
}

// output is what a hook wrote, for the log: valid UTF-8, without the
// trailing newline, and how much more there was past the cap.
func output(c *capbuf.Buffer) string {
	s := strings.TrimRight(strings.ToValidUTF8(c.String(), "\uFFFD"), "\n")
	if n := c.Dropped(); n > 0 {
		s += "\n… (" + strconv.Itoa(n) + " more bytes)"
	}
	return s
}

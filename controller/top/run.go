package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/capbuf"
	"github.com/gearshift/gearshift/profiles"
)

// Log reads one Varnish's backend requests with varnishlog: backend
// transactions, and the client requests refused for their budget (the
// query), and of them only the records a Request is made of, so the child
// and this reader stay cheap however busy the site.
// Reading needs access to that Varnish's shared memory log: root, or a
// member of the varnish group.
type Log struct {
	Name   string // varnishd's -n: an instance name or its working directory
	Binary string // the varnishlog program; "": varnishlog on $PATH
}

// query selects the transactions read: every backend request, and a
// client request the profiles refused for its budget.
var query = `Begin ~ "^bereq" or VCL_Log ~ "^` + profiles.ReasonLog + OverBudget + ` "`

// Args are varnishlog's arguments.
func (l Log) Args() []string {
	// -t 0: fail at once when no varnishd runs under that name, instead
	// of retrying the shared-memory attach for five seconds.
	return []string{"-n", l.Name, "-t", "0", "-q", query, "-i", strings.Join(Tags, ","), "-I", xffTag}
}

// Watch runs varnishlog until ctx ends and calls emit, from the calling
// goroutine, with every backend request it reports. It returns nil when
// ctx ended, and an error when varnishlog could not start or stopped by
// itself (no such Varnish, no access to its log).
func (l Log) Watch(ctx context.Context, emit func(Request)) error {
	return l.run(ctx, l.Args(), func(r io.Reader) error { return parseLog(r, emit) })
}

// run runs varnishlog with args until ctx ends, its output read by parse.
// It returns nil when ctx ended, and an error when varnishlog could not
// start or stopped by itself.
func (l Log) run(ctx context.Context, args []string, parse func(io.Reader) error) error {
	bin := l.Binary
	if bin == "" {
		bin = "varnishlog"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// SIGTERM lets varnishlog write the transactions it holds; one that
	// hangs is killed a moment later.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Second
	stderr := &capbuf.Buffer{Max: 4 << 10}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("run varnishlog -n %s: %w", l.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run varnishlog -n %s: %w", l.Name, err)
	}
	perr := parse(stdout)
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return nil
	}
	if perr != nil && !errors.Is(perr, context.Canceled) {
		return fmt.Errorf("read varnishlog -n %s: %w", l.Name, perr)
	}
	msg := firstLine(stderr.String())
	switch {
	case werr != nil && msg != "":
		return fmt.Errorf("run varnishlog -n %s: %w: %s", l.Name, werr, msg)
	case werr != nil:
		return fmt.Errorf("run varnishlog -n %s: %w", l.Name, werr)
	case msg != "":
		return fmt.Errorf("varnishlog -n %s stopped: %s", l.Name, msg)
	}
	return fmt.Errorf("varnishlog -n %s stopped", l.Name)
}

// Collect reads the log for d (or until ctx ends) and returns the tally
// and the seconds it covers.
func (l Log) Collect(ctx context.Context, d time.Duration) (*Tally, float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := NewTally()
	start := time.Now()
	err := l.Watch(ctx, t.Add)
	return t, time.Since(start).Seconds(), err
}

// Snapshot reads the backend requests of the Varnish named name
// (varnishd's -n; varnish.targets[].name) for d and returns them by
// reason, most first, each with its most frequent method and URL pattern
// and cookie. It works whether or not the gearshift daemon runs; it needs
// access to that Varnish's log (root or the varnish group). It returns
// early with an error when the log cannot be read.
func Snapshot(ctx context.Context, name string, d time.Duration) (Summary, error) {
	t, secs, err := Log{Name: name}.Collect(ctx, d)
	if err != nil {
		return Summary{}, err
	}
	return t.Summary(name, secs), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// TargetName returns the -n name of the target to read: the one named
// want, or when want is "" the first target with a name.
func TargetName(targets []config.Target, want string) (string, error) {
	var names []string
	for _, t := range targets {
		if t.Name == "" {
			continue
		}
		if want == "" || t.Name == want {
			return t.Name, nil
		}
		names = append(names, t.Name)
	}
	if want != "" {
		return "", fmt.Errorf("no Varnish target is named %q (varnish.targets[].name: %s)", want, strings.Join(names, ", "))
	}
	return "", errors.New("no Varnish target has a name: set varnish.targets[].name to varnishd's -n to read its log")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/logging"
	"github.com/gearshift/gearshift/controller/pidfile"
)

// logOptions are the flags of `gearshift logs`.
type logOptions struct {
	follow      bool
	lines       int
	linesSet    bool
	transitions bool
	since       string
	json        bool
	reopen      bool

	poll time.Duration  // how often -f looks for new lines and rotation
	loc  *time.Location // where times are shown
	now  func() time.Time
}

func newLogsCmd(a *app) *cobra.Command {
	o := logOptions{poll: 250 * time.Millisecond, loc: time.Local, now: time.Now}
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Show the daemon's log, human-formatted; -f follows it across log rotation",
		Long: `Show the daemon's log file (log.file in the config): the last -n entries,
one line each, with gear changes as "light → heavy" with their reason and
switch time. --transitions keeps only gear changes, --since only recent
entries (a duration such as 1h, or a time such as 2026-11-30T14:00:00Z),
--json prints the raw JSON lines. -f keeps following the file, across
logrotate's rename and copytruncate alike. --reopen asks the running daemon
to reopen its log file instead (SIGUSR1, sent only to the daemon holding
the pid file's lock, never to whatever process a stale pid file names):
logrotate's postrotate runs it.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			o.linesSet = cmd.Flags().Changed("lines")
			ctx, stop := signal.NotifyContext(ctxOrBackground(cmd.Context()), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, _ := a.daemonConfig()
			if o.reopen {
				return a.reopenLog(cfg.PIDFile)
			}
			if cfg.Log.File == "" {
				return exitUsage, errors.New("log.file is empty in the config: the daemon logs to stderr only (see journalctl -u gearshift)")
			}
			return a.logs(ctx, cfg.Log.File, o)
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new entries as they are written")
	f.IntVarP(&o.lines, "lines", "n", 20, "how many of the last entries to print (0: all)")
	f.BoolVar(&o.transitions, "transitions", false, "only gear changes")
	f.StringVar(&o.since, "since", "", "only entries since this long ago (1h, 30m) or this time (RFC 3339)")
	f.BoolVar(&o.json, "json", false, "print the raw JSON lines")
	f.BoolVar(&o.reopen, "reopen", false, "make the running daemon reopen its log file (logrotate's postrotate)")
	cmd.MarkFlagsMutuallyExclusive("reopen", "follow")
	return cmd
}

// reopenLog sends SIGUSR1 to the daemon that holds the pid file locked. No
// daemon running is no error: there is no log file to reopen.
func (a *app) reopenLog(pidFile string) (int, error) {
	pid, err := pidfile.Signal(pidFile, syscall.SIGUSR1)
	if err != nil {
		return exitFailure, err
	}
	if pid == 0 {
		fmt.Fprintf(a.stdout, "gearshift is not running (no live daemon holds %s): no log file to reopen\n", pidFile)
		return exitOK, nil
	}
	fmt.Fprintf(a.stdout, "asked gearshift (pid %d) to reopen its log file\n", pid)
	return exitOK, nil
}

func (a *app) logs(ctx context.Context, path string, o logOptions) (int, error) {
	if o.lines < 0 {
		return exitUsage, fmt.Errorf("-n must be 0 (all) or more, got %d", o.lines)
	}
	flt := logging.Filter{Transitions: o.transitions}
	if o.since != "" {
		t, err := logging.ParseSince(o.since, o.now())
		if err != nil {
			return exitUsage, fmt.Errorf("--since %q: %w", o.since, err)
		}
		flt.Since = t
	}
	limit := o.lines
	if o.since != "" && !o.linesSet {
		limit = 0 // --since alone: everything since then
	}
	fmtr := &logging.Formatter{W: a.stdout, JSON: o.json, Loc: o.loc}

	f, err := os.Open(path)
	if err != nil && !(o.follow && errors.Is(err, os.ErrNotExist)) {
		if errors.Is(err, os.ErrNotExist) {
			return exitFailure, fmt.Errorf("log file %s does not exist: has the daemon run with this config?", path)
		}
		return exitFailure, fmt.Errorf("open log: %w", err)
	}
	var offset int64
	if f != nil {
		offset, err = logging.Tail(f, limit, &flt, fmtr.Print)
		f.Close()
		if err != nil {
			return exitFailure, fmt.Errorf("read %s: %w", path, err)
		}
	}
	if !o.follow {
		return exitOK, nil
	}
	err = logging.Follow(ctx, path, offset, o.poll, func(line []byte) {
		if flt.Keep(line) {
			fmtr.Print(line)
		}
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return exitFailure, err
	}
	return exitOK, nil
}

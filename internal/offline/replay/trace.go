package replay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/trace"
)

// TraceOptions are what `gearshift simulate --trace` is asked.
type TraceOptions struct {
	Path       string         // the CSV trace; "-" reads Stdin
	Stdin      io.Reader      // the trace when Path is "-"
	Config     *config.Config // its signals, rules, hysteresis, fast_window and cpus
	ConfigName string         // the config's path, or "embedded defaults"
	CPUs       int            // CPUs of the traced host for rows without a cpus column; 0: the config's, else this machine's
	JSON       bool           // JSON rather than text on stdout
}

// RunTrace replays a CSV trace through the state machine under the config
// and writes each transition and the time in each gear to stdout, and the
// columns it ignored to stderr. Errors of the request (a trace that cannot
// be opened or read, a bad --cpus) are *report.UsageError.
func RunTrace(o TraceOptions, stdout, stderr io.Writer) error {
	if o.CPUs < 0 {
		return usage("--cpus %d: must be 0 (detect) or more", o.CPUs)
	}
	cpus, cpusFrom := o.CPUs, "from --cpus"
	switch {
	case cpus > 0:
	case o.Config.CPUs > 0:
		cpus, cpusFrom = o.Config.CPUs, "from the config"
	default:
		cpus, cpusFrom = runtime.NumCPU(), "this machine's"
	}
	in, name := o.Stdin, "standard input"
	if o.Path != "-" {
		f, err := os.Open(o.Path)
		if err != nil {
			return usage("open trace: %w", err)
		}
		defer f.Close()
		in, name = f, o.Path
	}
	signals, err := o.Config.Signals()
	if err != nil {
		return usage("%w", err)
	}
	rd, err := trace.NewReader(in, signals, cpus, cpusFrom)
	if err != nil {
		return traceError(name, err)
	}
	for _, w := range rd.Warnings {
		fmt.Fprintf(stderr, "gearshift: trace %s, %s\n", name, w)
	}
	fast := time.Duration(o.Config.FastWindow)
	rules := o.Config.StateConfig(signals)
	res, err := ReplayTrace(state.New(rules, fast), rd)
	if err != nil {
		return traceError(name, err)
	}
	if o.JSON {
		return res.WriteJSON(stdout)
	}
	res.WriteText(stdout, TraceHeading{Trace: name, CPUsFrom: rd.CPUs, Config: o.ConfigName, FastWindow: fast, Machine: rules})
	return nil
}

// traceError names the trace in an error reading it.
func traceError(name string, err error) error {
	var te *trace.Error
	if errors.As(err, &te) {
		return usage("trace %s, %w", name, err)
	}
	return usage("read trace %s: %w", name, err)
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gearshift/gearshift/controller/state"
	"github.com/gearshift/gearshift/controller/state/trace"
	"github.com/gearshift/gearshift/profiles"
)

func newSimulateCmd(a *app) *cobra.Command {
	var (
		path   string
		asJSON bool
		cpus   int
	)
	cmd := &cobra.Command{
		Use:   "simulate --trace FILE",
		Short: "Replay a CSV trace of samples through the state machine",
		Long: `Replay a CSV trace of samples through the state machine, with the config's
thresholds and hysteresis, and print each transition and the time spent in
each gear. Tune thresholds against last month's load before trusting the daemon.

The trace has a header row. Columns: time (RFC 3339 or seconds) and load1
are required; load5, load15, runnable, cpus and the signals
(` + strings.Join(rawSignals(), ", ") + `) are optional (an empty cell is a
missing figure). A row without runnable feeds the fast signal with load1. sadf -d output of sar -q
(timestamp, ldavg-1, runq-sz; semicolons) is read as is.

The CPU count comes from the cpus column, else --cpus, else the config's
cpus, else this machine's.`,
		Example: `  gearshift simulate --trace scripts/traces/surge.csv
  gearshift simulate --trace last-month.csv --config candidate.yaml --json
  sadf -d -- -q | grep -v RESTART | gearshift simulate --trace - --cpus 8`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) (int, error) {
			return a.simulate(path, cpus, asJSON)
		}),
	}
	cmd.Flags().StringVar(&path, "trace", "", "CSV trace to replay (- for standard input)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	cmd.Flags().IntVar(&cpus, "cpus", 0, "CPUs of the traced host, for rows without a cpus column (0 = the config's cpus, else this machine's)")
	_ = cmd.MarkFlagRequired("trace")
	return cmd
}

func (a *app) simulate(path string, cpus int, asJSON bool) (int, error) {
	if cpus < 0 {
		return exitUsage, fmt.Errorf("--cpus %d: must be 0 (detect) or more", cpus)
	}
	cfg, err := a.loadConfigOffline()
	if err != nil {
		return exitUsage, err
	}
	cpusFrom := "from --cpus"
	switch {
	case cpus > 0:
	case cfg.CPUs > 0:
		cpus, cpusFrom = cfg.CPUs, "from the config"
	default:
		cpus, cpusFrom = runtime.NumCPU(), "this machine's"
	}

	var in io.Reader = a.stdin
	name := "standard input"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return exitUsage, fmt.Errorf("open trace: %w", err)
		}
		defer f.Close()
		in, name = f, path
	}
	rd, err := trace.NewReader(in, cpus, cpusFrom)
	if err != nil {
		return exitUsage, traceError(name, err)
	}
	for _, w := range rd.Warnings {
		fmt.Fprintf(a.stderr, "gearshift: trace %s, %s\n", name, w)
	}

	fast := time.Duration(cfg.FastWindow)
	res, err := trace.Replay(state.New(cfg.StateConfig(), fast), rd)
	if err != nil {
		return exitUsage, traceError(name, err)
	}
	if asJSON {
		return printSimulationJSON(a.stdout, res)
	}
	configFrom := a.configPath
	if !a.configSet {
		if _, err := os.Stat(a.configPath); errors.Is(err, os.ErrNotExist) {
			configFrom = "embedded defaults"
		}
	}
	sc := cfg.StateConfig()
	fmt.Fprintf(a.stdout, "Trace %s: %d sample%s over %s, %s.\n", name, res.Samples, plural(res.Samples), dur(res.Duration), cpuNote(res, rd.CPUs))
	fmt.Fprintf(a.stdout, "Config: %s; fast_window %s, up_confirm %d, down_window %s, min_dwell %s.\n\n",
		configFrom, dur(fast), sc.UpConfirm, dur(sc.DownWindow), dur(sc.MinDwell))
	printSimulation(a.stdout, res)
	return exitOK, nil
}

// traceError names the trace in an error reading it.
func traceError(name string, err error) error {
	var te *trace.Error
	if errors.As(err, &te) {
		return fmt.Errorf("trace %s, %w", name, err)
	}
	return fmt.Errorf("read trace %s: %w", name, err)
}

// cpuNote says how many CPUs the replay divided the load by, and why.
func cpuNote(res trace.Result, from string) string {
	if res.CPUsMin == res.CPUsMax {
		return fmt.Sprintf("%d CPU%s (%s)", res.CPUsMin, plural(res.CPUsMin), from)
	}
	return fmt.Sprintf("%d to %d CPUs (%s)", res.CPUsMin, res.CPUsMax, from)
}

func printSimulation(w io.Writer, res trace.Result) {
	if len(res.Transitions) == 0 {
		fmt.Fprintf(w, "No transitions: light throughout.\n\n")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "OFFSET\tTIME\tSHIFT\tREASON")
		for _, t := range res.Transitions {
			fmt.Fprintf(tw, "%s\t%s\t%s → %s\t%s\n", offset(t.Offset), t.Sample.Text, t.From, t.To, t.Reason)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}

	width := len("TIME")
	for _, d := range append(res.TimeIn[:], res.Duration) {
		width = max(width, len(dur(d)))
	}
	fmt.Fprintf(w, "%-8s  %*s  %6s\n", "GEAR", width, "TIME", "SHARE")
	for _, st := range state.All {
		fmt.Fprintf(w, "%-8s  %*s  %6s\n", st, width, dur(res.TimeIn[st]), share(res.TimeIn[st], res.Duration))
	}
	fmt.Fprintf(w, "%-8s  %*s  %d transition%s\n", "total", width, dur(res.Duration), len(res.Transitions), plural(len(res.Transitions)))
	fmt.Fprintf(w, "\nPeak load_per_cpu %.2f at %s", res.Peak.Value, offset(res.Peak.Offset))
	if res.LowMem != nil {
		fmt.Fprintf(w, "; lowest mem_available_pct %.1f at %s", res.LowMem.Value, offset(res.LowMem.Offset))
	}
	fmt.Fprintln(w, ".")
}

// simulationJSON is the shape SPEC section 7 fixes for simulate --json.
type simulationJSON struct {
	Transitions []transitionJSON `json:"transitions"`
	Summary     struct {
		Samples     int                `json:"samples"`
		Transitions int                `json:"transitions"`
		SecondsIn   map[string]float64 `json:"seconds_in"`
	} `json:"summary"`
}

type transitionJSON struct {
	OffsetS float64 `json:"offset_s"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Reason  string  `json:"reason"`
}

func printSimulationJSON(w io.Writer, res trace.Result) (int, error) {
	out := simulationJSON{Transitions: []transitionJSON{}}
	for _, t := range res.Transitions {
		out.Transitions = append(out.Transitions, transitionJSON{
			OffsetS: t.Offset.Seconds(), From: t.From.String(), To: t.To.String(), Reason: t.Reason,
		})
	}
	out.Summary.Samples = res.Samples
	out.Summary.Transitions = len(res.Transitions)
	out.Summary.SecondsIn = map[string]float64{}
	for _, st := range state.All {
		out.Summary.SecondsIn[st.String()] = res.TimeIn[st].Seconds()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return exitFailure, fmt.Errorf("write json: %w", err)
	}
	return exitOK, nil
}

// offset formats a time since the first sample as +H:MM:SS.
func offset(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("+%d:%02d:%02d", s/3600, s/60%60, s%60)
}

// dur formats a duration to the second, as the config writes durations.
func dur(d time.Duration) string { return profiles.Duration(d.Round(time.Second)).String() }

func share(part, whole time.Duration) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// rawSignals names the signals a trace can have a column for.
func rawSignals() []string {
	var ns []string
	for _, s := range state.Table() {
		if s.Raw() {
			ns = append(ns, s.Name)
		}
	}
	return ns
}

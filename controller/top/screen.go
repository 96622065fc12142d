package top

import (
	"cmp"
	"context"
	"encoding/json"
	"os"

	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// View is a snapshot as `gearshift top --json` prints it: the summary by
// reason and the top rows of the chosen grouping.
type View struct {
	Summary
	By   string `json:"by"`
	Rows []Row  `json:"rows"`
}

// View returns the tally's summary and its n top rows by b.
func (t *Tally) View(target string, b By, n int, seconds float64) View {
	return View{Summary: t.Summary(target, seconds), By: b.String(), Rows: t.Rows(b, n, seconds)}
}

// Screen shows the backend requests live, like top: every second, the
// rates over the last Window seconds.
type Screen struct {
	Log    Log
	By     By
	N      int           // rows shown; 0: 20
	For    time.Duration // stop after it; 0: when ctx ends
	Window int           // seconds the rates are averaged over; 0: 5
	Clear  bool          // clear the terminal before each screen (else one after the other)
	Out    io.Writer
}

// Run shows a screen every second until ctx ends or For has passed. It
// returns varnishlog's error if that stops first.
func (s Screen) Run(ctx context.Context) error {
	n, window := s.N, s.Window
	if n <= 0 {
		n = 20
	}
	if window <= 0 {
		window = 5
	}
	if s.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.For)
		defer cancel()
	}
	reqs := make(chan Request, 4096)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- s.Log.Watch(ctx, func(q Request) {
			select {
			case reqs <- q:
			case <-ctx.Done():
			}
		})
	}()

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	ring := make([]*Tally, 0, window) // the last seconds, oldest first
	cur := NewTally()
	start := time.Now()
	for {
		select {
		case q := <-reqs:
			cur.Add(q)
		case err := <-watchErr:
			return err
		case now := <-tick.C:
			if len(ring) == window {
				ring = append(ring[:0], ring[1:]...)
			}
			ring = append(ring, cur)
			cur = NewTally()
			all := NewTally()
			for _, t := range ring {
				all.Merge(t)
			}
			secs := float64(window)
			if len(ring) < window {
				secs = now.Sub(start).Seconds()
			}
			if err := WriteScreen(s.Out, all.View(s.Log.Name, s.By, n, secs), now, s.Clear); err != nil {
				return err
			}
		}
	}
}

// Column widths of a screen, by grouping.
var widths = [numBy]int{ByURL: 36, ByReason: 18, ByCookie: 18, ByClient: 16}

// WriteScreen writes v as one screen: a title line, a header, the rows.
// With clear, it starts with the ANSI codes that clear a terminal.
func WriteScreen(w io.Writer, v View, now time.Time, clear bool) error {
	var b strings.Builder
	if clear {
		b.WriteString("\x1b[H\x1b[2J")
	}
	by, _ := ParseBy(v.By)
	fmt.Fprintf(&b, "gearshift top %s: %.1f backend requests/s over %.0f s, by %s   %s\n",
		v.Target, v.Rate, v.Seconds, v.By, now.Format("15:04:05"))
	var top []string
	for i, r := range v.Reasons {
		if i == 4 {
			break
		}
		top = append(top, r.String())
	}
	if len(top) > 0 {
		b.WriteString("  " + strings.Join(top, ", ") + "\n")
	}
	b.WriteString("\n")
	cols := []By{by}
	for o := By(0); o < numBy; o++ {
		if o != by {
			cols = append(cols, o)
		}
	}
	line := fmt.Sprintf("%8s %6s", "REQ/S", "SHARE")
	for _, c := range cols {
		line += "  " + pad(strings.ToUpper(c.String()), widths[c])
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
	for _, r := range v.Rows {
		line := fmt.Sprintf("%8.1f %5.1f%%", r.Rate, r.Share*100)
		for _, c := range cols {
			line += "  " + pad(r.field(c, by), widths[c])
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	if !clear {
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// field is the row's value in column c of a screen grouped by by.
func (r Row) field(c, by By) string {
	if c == by {
		return r.Key
	}
	var s string
	switch c {
	case ByURL:
		s = r.URL
	case ByReason:
		s = r.Reason
	case ByCookie:
		s = r.Cookie
	case ByClient:
		s = r.Client
	}
	if s == "" {
		return Unknown
	}
	return s
}

// pad fits s in a column of n characters.
func pad(s string, n int) string {
	rs := []rune(s)
	if len(rs) > n {
		return string(rs[:n-1]) + "…"
	}
	return s + strings.Repeat(" ", n-len(rs))
}

// Print is `gearshift top`: a live Screen for d (0: until ctx ends),
// cleared between screens when out is a terminal; or, with asJSON, one
// View after d (10 s when 0), as indented JSON.
func Print(ctx context.Context, l Log, b By, d time.Duration, asJSON bool, out io.Writer) error {
	if !asJSON {
		return Screen{Log: l, By: b, For: d, Clear: isTerminal(out), Out: out}.Run(ctx)
	}
	t, secs, err := l.Collect(ctx, cmp.Or(d, 10*time.Second))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(t.View(l.Name, b, 20, secs))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/gearshift/gearshift/controller"
)

// manSection is the section of every page: gearshift is a system
// administration command.
const manSection = "8"

// newManpagesCmd is the build step that writes the manual: gearshift(8) and a
// gearshift-<command>(8) page per subcommand, from the command tree itself.
// Hidden: packagers run it (make man), operators read the result.
func newManpagesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:    "manpages DIR",
		Short:  "Write gearshift's manual pages (section 8) into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) (int, error) {
			if err := writeManPages(cmd.Root(), args[0]); err != nil {
				return exitFailure, err
			}
			return exitOK, nil
		}),
	}
}

// writeManPages renders every available command of root into dir. The help
// texts are plain text written for --help; they are escaped for Markdown,
// which cobra/doc renders through go-md2man, so that text such as
// `<STATUS>` is not taken for an HTML tag and dropped, and each line keeps
// its own line as in --help.
func writeManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	root.InitDefaultCompletionCmd()
	root.DisableAutoGenTag = true
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && (!c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand()) {
			return
		}
		cmds = append(cmds, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, c := range cmds {
		c.Short = manEscape(c.Short)
		c.Long = manEscapeLines(c.Long)
		escapeFlags(c.LocalFlags())
		c.DisableAutoGenTag = true
	}
	escapeFlags(root.PersistentFlags())
	header := &doc.GenManHeader{
		Section: manSection,
		Source:  "gearshift " + controller.Version,
		Manual:  "gearshift manual",
	}
	for _, c := range cmds {
		var buf bytes.Buffer
		h := *header
		if err := doc.GenMan(c, &h, &buf); err != nil {
			return fmt.Errorf("render the page of %s: %w", c.CommandPath(), err)
		}
		page := buf.Bytes()
		if c == root {
			page = withRootSections(page)
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + "." + manSection
		if err := os.WriteFile(filepath.Join(dir, name), page, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// escapeFlags escapes each flag's usage once (persistent flags are shared
// between a command and its children).
func escapeFlags(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		if _, done := f.Annotations["gearshift_man_escaped"]; done {
			return
		}
		f.Annotations["gearshift_man_escaped"] = nil
		f.Usage = manEscape(f.Usage)
	})
}

// manEscape backslash-escapes what Markdown would take for markup.
func manEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]<>#|~!", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// manEscapeLines escapes plain help text for Markdown. Lines wrapped for
// the terminal are joined again; a line keeps its own line when it is
// indented (a sample of output), follows one, or starts a new sentence on a
// capital after a line that ended one ("WARNING: …" after "… --max-age.").
func manEscapeLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	out := make([]string, len(lines))
	for i, l := range lines {
		e := manEscape(strings.TrimSpace(l))
		// A line that begins like a list item or heading stays text.
		if e != "" && strings.ContainsRune("-+=", rune(e[0])) {
			e = "\\" + e
		}
		out[i] = e
		if i > 0 && e != "" && out[i-1] != "" && ownLine(lines[i-1], l) {
			out[i-1] += "  " // Markdown's hard line break
		}
	}
	return strings.Join(out, "\n")
}

func ownLine(prev, line string) bool {
	indented := func(s string) bool { return strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\t") }
	if indented(prev) || indented(line) {
		return true
	}
	prev = strings.TrimSpace(prev)
	end := prev[len(prev)-1]
	return (end == '.' || end == ':') && line[0] >= 'A' && line[0] <= 'Z'
}

// rootSections are the parts of gearshift(8) that no single command's help
// holds: where things live, and how it exits.
const rootSections = `.SH FILES
.TP
\fI/etc/gearshift/gearshift.yaml\fR
the config (see \fBgearshift\-config\fR(8)); without it the built-in defaults apply, which match a stock Debian Varnish
.TP
\fI/run/gearshift/gearshift.sock\fR
the control socket (status, force, auto, check)
.TP
\fI/run/gearshift/gearshift.pid\fR
the pid file (stop, reload, logrotate)
.TP
\fI/var/log/gearshift/gearshift.log\fR
the log, JSON lines (see \fBgearshift\-logs\fR(8))
.TP
\fI/lib/systemd/system/gearshift.service\fR
the systemd unit, which runs \fBgearshift run\fR
.TP
\fI/etc/cron.d/gearshift\fR
the watchdog, \fBgearshift check \-\-restart \-\-quiet\fR every minute
.SH EXIT STATUS
0 on success, 1 on a runtime failure (the daemon unreachable, Varnish refused), 2 on a usage or config error.
\fBgearshift check\fR exits as a monitoring plugin does: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
`

// withRootSections inserts rootSections before SEE ALSO.
func withRootSections(page []byte) []byte {
	at := bytes.Index(page, []byte(".SH SEE ALSO"))
	if at < 0 {
		return append(page, rootSections...)
	}
	out := append([]byte{}, page[:at]...)
	out = append(out, rootSections...)
	return append(out, page[at:]...)
}

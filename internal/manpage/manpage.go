// Package manpage renders a cobra command tree as manual pages, one per
// available command, with the plain-text help escaped for the Markdown
// that cobra/doc hands to go-md2man.
package manpage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// Page describes the manual the pages belong to.
type Page struct {
	Section string // "8"
	Source  string // the footer's source, e.g. "gearshift 0.2.0"
	Manual  string // the header's manual name
	// RootSections is roff inserted into the root command's page before
	// SEE ALSO (FILES, EXIT STATUS: what no single command's help holds).
	RootSections string
}

// Write renders every available command of root into dir, as
// <command path with dashes>.<section>. The help texts are plain text
// written for --help; they are escaped for Markdown, so that text such as
// `<STATUS>` is not taken for an HTML tag and dropped, and each line keeps
// its own line as in --help. Write changes the help texts of the tree it
// renders.
func Write(root *cobra.Command, dir string, p Page) error {
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
		c.Short = Escape(c.Short)
		c.Long = EscapeLines(c.Long)
		escapeFlags(c.LocalFlags())
		c.DisableAutoGenTag = true
	}
	escapeFlags(root.PersistentFlags())
	header := &doc.GenManHeader{Section: p.Section, Source: p.Source, Manual: p.Manual}
	for _, c := range cmds {
		var buf bytes.Buffer
		h := *header
		if err := doc.GenMan(c, &h, &buf); err != nil {
			return fmt.Errorf("render the page of %s: %w", c.CommandPath(), err)
		}
		page := buf.Bytes()
		if c == root && p.RootSections != "" {
			page = insertSections(page, p.RootSections)
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + "." + p.Section
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
		f.Usage = Escape(f.Usage)
	})
}

// Escape backslash-escapes what Markdown would take for markup.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]<>#|~!", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// EscapeLines escapes plain help text for Markdown. Lines wrapped for
// the terminal are joined again; a line keeps its own line when it is
// indented (a sample of output), follows one, or starts a new sentence on a
// capital after a line that ended one ("WARNING: …" after "… --max-age.").
func EscapeLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	out := make([]string, len(lines))
	for i, l := range lines {
		e := Escape(strings.TrimSpace(l))
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

// insertSections inserts roff sections before SEE ALSO, or at the end.
func insertSections(page []byte, sections string) []byte {
	at := bytes.Index(page, []byte(".SH SEE ALSO"))
	if at < 0 {
		return append(page, sections...)
	}
	out := append([]byte{}, page[:at]...)
	out = append(out, sections...)
	return append(out, page[at:]...)
}

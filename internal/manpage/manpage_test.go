package manpage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestManEscape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"angle brackets", "GEARSHIFT <STATUS>", `GEARSHIFT \<STATUS\>`},
		{"globs and underscores", "wordpress_logged_in_*", `wordpress\_logged\_in\_\*`},
		{"backslash", `a\b`, `a\\b`},
		{"plain", "load_per_cpu 1.5", `load\_per\_cpu 1.5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Escape(tc.in); got != tc.want {
				t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, in, want string }{
		{"wrapped lines join", "one two\nthree.", "one two\nthree."},
		{"a new sentence on a capital keeps its line", "ends here.\nNext: more", "ends here.  \nNext: more"},
		{"an indented sample keeps its lines", "print:\n  <line>\nafter", "print:  \n\\<line\\>  \nafter"},
		{"a leading dash is not a list", "x\n--flag y", "x\n\\--flag y"},
		{"paragraphs stay", "a.\n\nB", "a.\n\nB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EscapeLines(tc.in); got != tc.want {
				t.Errorf("EscapeLines(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// Write makes a page per available command, escapes the help for Markdown
// and puts the root's extra sections before SEE ALSO.
func TestWrite(t *testing.T) {
	root := &cobra.Command{Use: "tool", Short: "A tool", Long: "Prints <STATUS>.\nWARNING: said on its own line."}
	root.AddCommand(
		&cobra.Command{Use: "show", Short: "Show a_b", Run: func(*cobra.Command, []string) {}},
		&cobra.Command{Use: "secret", Short: "Hidden", Hidden: true, Run: func(*cobra.Command, []string) {}},
	)
	root.PersistentFlags().String("config", "", "the config <FILE>")
	dir := t.TempDir()
	const extra = ".SH FILES\n.TP\n/etc/tool\n"
	if err := Write(root, dir, Page{Section: "8", Source: "tool 1.0", Manual: "tool manual", RootSections: extra}); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, filepath.Base(n))
	}
	if want := "tool-completion-bash.8 tool-completion-fish.8 tool-completion-powershell.8 tool-completion-zsh.8 tool-completion.8 tool-show.8 tool.8"; strings.Join(got, " ") != want {
		t.Errorf("pages %v, want %s", got, want)
	}
	page, err := os.ReadFile(filepath.Join(dir, "tool.8"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	files, also := strings.Index(text, extra), strings.Index(text, ".SH SEE ALSO")
	if files < 0 || also < files {
		t.Errorf("the root sections are not before SEE ALSO:\n%s", text)
	}
	for _, want := range []string{"Prints <STATUS>", ".br\nWARNING: said on its own line.", "the config <FILE>", "tool manual", "tool 1.0"} {
		if !strings.Contains(text, want) {
			t.Errorf("tool.8 lacks %q:\n%s", want, text)
		}
	}
	if show, _ := os.ReadFile(filepath.Join(dir, "tool-show.8")); strings.Contains(string(show), ".SH FILES") {
		t.Error("a subcommand's page has the root's sections")
	}
}

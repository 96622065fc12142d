package architecture

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink is a Markdown link's target: ](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdHeading and mdAnchor are what a page's anchors come from: a heading
// (its slug, as GitHub makes it) or an explicit <a id="…">.
var (
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	mdAnchor  = regexp.MustCompile(`<a id="([^"]+)"`)
	notSlug   = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// slug is GitHub's anchor of a heading.
func slug(heading string) string {
	return strings.ReplaceAll(notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}

func anchorsOf(page string) map[string]bool {
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(page, -1) {
		out[slug(m[1])] = true
	}
	for _, m := range mdAnchor.FindAllStringSubmatch(page, -1) {
		out[m[1]] = true
	}
	return out
}

// TestDocLinks: every relative link of the README, BENCHMARKS.md and
// docs/ leads to a file of the tree, and to an anchor of that page when
// it names one, so that moving a section between pages breaks no link.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md"))
	read := map[string]string{}
	load := func(p string) (string, error) {
		if s, ok := read[p]; ok {
			return s, nil
		}
		b, err := os.ReadFile(p)
		read[p] = string(b)
		return read[p], err
	}
	links := 0
	for _, p := range pages {
		page, err := load(p)
		if err != nil {
			t.Fatal(err)
		}
		// Code spans and blocks hold examples, not links.
		page = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`").ReplaceAllString(page, "")
		for _, m := range mdLink.FindAllStringSubmatch(page, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			dest := p
			if file != "" {
				dest = filepath.Join(filepath.Dir(p), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %s: no file %s", p, target, dest)
				continue
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			to, err := load(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", p, target, err)
				continue
			}
			if !anchorsOf(to)[frag] {
				t.Errorf("%s: link %s: %s has no anchor %q", p, target, dest, frag)
			}
		}
	}
	if links < 50 {
		t.Fatalf("read %d relative links, want the docs' hundreds", links)
	}
}

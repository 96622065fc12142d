package apps

import (
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// form is an HTML form as a browser would submit it untouched: where it
// goes and the fields it sends (hidden and text inputs, checked boxes,
// selected options, text areas; no buttons).
type form struct {
	action string
	fields url.Values
}

var (
	formRE     = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	inputRE    = regexp.MustCompile(`(?is)<input\b([^>]*)>`)
	textareaRE = regexp.MustCompile(`(?is)<textarea\b([^>]*)>(.*?)</textarea>`)
	selectRE   = regexp.MustCompile(`(?is)<select\b([^>]*)>(.*?)</select>`)
	optionRE   = regexp.MustCompile(`(?is)<option\b([^>]*)>`)
	attrRE     = regexp.MustCompile(`(?s)([a-zA-Z_:][-a-zA-Z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>]+)))?`)
)

// attrs parses the attributes of a start tag; a bare attribute (checked)
// has itself as its value.
func attrs(tag string) map[string]string {
	m := map[string]string{}
	for _, a := range attrRE.FindAllStringSubmatch(tag, -1) {
		name := strings.ToLower(a[1])
		if _, seen := m[name]; seen {
			continue
		}
		switch {
		case a[2] != "" || strings.Contains(a[0], `""`):
			m[name] = html.UnescapeString(a[2])
		case a[3] != "":
			m[name] = html.UnescapeString(a[3])
		case a[4] != "":
			m[name] = html.UnescapeString(a[4])
		case strings.Contains(a[0], "="):
			m[name] = ""
		default:
			m[name] = name
		}
	}
	return m
}

// findForm returns the first form in page whose start tag contains
// marker (an attribute such as `name="userlogin"`), and whether there is
// one.
func findForm(page, marker string) (form, bool) {
	for _, m := range formRE.FindAllStringSubmatch(page, -1) {
		if !strings.Contains(m[1], marker) {
			continue
		}
		f := form{action: html.UnescapeString(attrs(m[1])["action"]), fields: url.Values{}}
		for _, in := range inputRE.FindAllStringSubmatch(m[2], -1) {
			a := attrs(in[1])
			name := a["name"]
			if name == "" {
				continue
			}
			switch strings.ToLower(a["type"]) {
			case "submit", "button", "image", "reset", "file":
				continue
			case "checkbox", "radio":
				if _, on := a["checked"]; !on {
					continue
				}
				if _, ok := a["value"]; !ok {
					a["value"] = "on"
				}
			}
			f.fields.Add(name, a["value"])
		}
		for _, ta := range textareaRE.FindAllStringSubmatch(m[2], -1) {
			if name := attrs(ta[1])["name"]; name != "" {
				f.fields.Add(name, html.UnescapeString(strings.TrimPrefix(ta[2], "\n")))
			}
		}
		for _, sel := range selectRE.FindAllStringSubmatch(m[2], -1) {
			name := attrs(sel[1])["name"]
			if name == "" {
				continue
			}
			for _, opt := range optionRE.FindAllStringSubmatch(sel[2], -1) {
				if a := attrs(opt[1]); a["selected"] != "" {
					f.fields.Add(name, a["value"])
					break
				}
			}
		}
		return f, true
	}
	return form{}, false
}

// mustForm is findForm that ends the test when there is no such form.
func mustForm(t *testing.T, what, page, marker string) form {
	t.Helper()
	f, ok := findForm(page, marker)
	if !ok {
		t.Fatalf("%s: no form with %s in the page:\n%.600s", what, marker, page)
	}
	return f
}

func TestFindForm(t *testing.T) {
	page := `<form id="search" action="/s"><input name="q"></form>
<form class="x" action="/index.php?title=A&amp;action=submit" method="post" name="editform">
<input type="hidden" value="+\" name="wpEditToken"/>
<input name='wpSummary' type=text value='a &quot;b&quot;'>
<input type="checkbox" name="wpMinoredit" checked>
<input type="checkbox" name="wpWatchthis" value="1">
<input type="submit" name="wpSave" value="Save">
<textarea name="wpTextbox1" rows="25">
Some &lt;b&gt;text</textarea>
<select name="server"><option value="1">a</option><option value="2" selected="selected">b</option></select>
</form>`
	f, ok := findForm(page, `name="editform"`)
	if !ok {
		t.Fatal("form not found")
	}
	want := url.Values{"wpEditToken": {`+\`}, "wpSummary": {`a "b"`}, "wpMinoredit": {"on"},
		"wpTextbox1": {"Some <b>text"}, "server": {"2"}}
	if f.action != "/index.php?title=A&action=submit" || f.fields.Encode() != want.Encode() {
		t.Errorf("got %q %v, want %v", f.action, f.fields, want)
	}
	if _, ok := findForm(page, `name="nosuch"`); ok {
		t.Error("found a form that is not there")
	}
}

package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gearshift/gearshift/controller/config"
	"github.com/gearshift/gearshift/internal/testsupport/golden"
	"github.com/gearshift/gearshift/internal/timefmt"
)

// TestDocsConfigKeys checks the docs' table of config keys against the
// config's types, their defaults and the comments on their fields (-update
// rewrites it). A key whose field has no comment fails: every setting says
// what it does where it is declared.
func TestDocsConfigKeys(t *testing.T) {
	const path = "../../docs/operating.md"
	const begin, end = "<!-- config-keys: generated from controller/config; go test ./cmd/gearshift -run DocsConfigKeys -update -->\n", "<!-- /config-keys -->\n"
	help := fieldComments(t, "../../controller/config", "../../controller/sensor", "../../profiles")
	var b strings.Builder
	b.WriteString("| key | default | what it is |\n|---|---|---|\n")
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		vt := v.Type()
		for i := range vt.NumField() {
			f := vt.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			fv := v.Field(i)
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(key+".", fv)
				continue
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				elem := reflect.New(f.Type.Elem()).Elem()
				if fv.Len() > 0 {
					elem = fv.Index(0)
				}
				walk(key+"[].", elem)
				continue
			}
			h := help[vt.Name()+"."+f.Name]
			if h == "" {
				t.Errorf("config key %s (%s.%s) has no comment on its field", key, vt.Name(), f.Name)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", key, defaultCell(fv), h)
		}
	}
	walk("", reflect.ValueOf(config.Default()).Elem())
	if t.Failed() {
		return
	}

	golden.CheckBlock(t, path, begin, end, "table of config keys", b.String())
}

// defaultCell renders a default for the table: a scalar as the YAML file
// would have it, a short list in full, a long one by its length.
func defaultCell(v reflect.Value) string {
	if d, ok := v.Interface().(timefmt.Duration); ok {
		return "`" + d.String() + "`"
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return "`\"\"`"
		}
		return "`" + v.String() + "`"
	case reflect.Slice:
		if v.Len() == 0 {
			return "`[]`"
		}
		if v.Len() > 5 {
			return fmt.Sprintf("%d entries (`gearshift config show`)", v.Len())
		}
		var items []string
		for i := range v.Len() {
			items = append(items, fmt.Sprint(v.Index(i).Interface()))
		}
		return "`[" + strings.Join(items, ", ") + "]`"
	case reflect.Map:
		if v.Len() == 0 {
			return "none"
		}
		var kv []string
		for _, sig := range config.Default().ShownSignals().All() {
			if x := v.MapIndex(reflect.ValueOf(sig.Name)); x.IsValid() {
				kv = append(kv, fmt.Sprintf("%s: %v", sig.Name, x.Interface()))
			}
		}
		return "`{" + strings.Join(kv, ", ") + "}`"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

// fieldComments reads the comments on the struct fields declared in the
// packages in dirs, by "Type.Field": the doc comment above a field, else
// the comment after it, on one line.
func fieldComments(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return false
				}
				for _, field := range st.Fields.List {
					text := field.Doc.Text()
					if text == "" {
						text = field.Comment.Text()
					}
					text = strings.Join(strings.Fields(text), " ")
					for _, id := range field.Names {
						out[ts.Name.Name+"."+id.Name] = text
					}
				}
				return false
			})
		}
	}
	return out
}

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong with a config, named by its key path
// ("states.heavy.enter.load_per_cpu", "varnish.targets[0].admin").
type Problem struct {
	Path string
	Msg  string
	Line int // line in the file, 0 when unknown (embedded defaults)
	Kind Kind
}

// Kind says what a problem depends on, for commands that use a config away
// from the server it runs on (see Offline).
type Kind int

const (
	// Setting: the config itself is wrong, wherever it is used.
	Setting Kind = iota
	// Machine: a file, group or command of this machine is missing or
	// unfit (an admin secret, a vcl_file, control.group, a hook).
	Machine
	// Unsourced: a rule tests a signal whose source is not configured; a
	// trace replayed offline may carry the signal all the same.
	Unsourced
)

func (p Problem) String() string {
	s := p.Msg
	if p.Path != "" {
		s = p.Path + ": " + p.Msg
	}
	if p.Line > 0 {
		s += fmt.Sprintf(" (line %d)", p.Line)
	}
	return s
}

// Error is a config that cannot be used, with every problem found in it.
type Error struct {
	File     string // "" for the embedded defaults
	Problems []Problem
}

func (e *Error) Error() string {
	src := "config " + e.File
	if e.File == "" {
		src = "embedded default config"
	}
	if len(e.Problems) == 1 {
		return src + ": " + e.Problems[0].String()
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%s has %d problems:\n%s", src, len(e.Problems), strings.Join(lines, "\n"))
}

// Load reads the YAML config at path over the defaults and validates it.
// Unknown keys, values of the wrong type and failed validation are all
// reported together in an *Error, each naming its key path.
func Load(path string) (*Config, error) {
	b, err := readTrustedConfig(path)
	var ue untrustedError
	if errors.As(err, &ue) {
		return nil, &Error{File: path, Problems: []Problem{{Msg: ue.Error()}}}
	}
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(b)
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.File = path
		}
		return nil, err
	}
	return cfg, nil
}

// Parse decodes a YAML config over the defaults and validates it. A rule
// given in the document (states.heavy.enter, …) replaces that rule's
// defaults as a whole; a list replaces the default list.
func Parse(b []byte) (*Config, error) { return parse(b, (*Config).validateAll) }

// ParseSettings is Parse with ValidateSettings: the document is judged on its
// own, without looking at the files it names (the admin secret may be
// unreadable to whoever asks, such as a monitoring agent).
func ParseSettings(b []byte) (*Config, error) { return parse(b, (*Config).ValidateSettings) }

func parse(b []byte, validate func(*Config) error) (*Config, error) {
	cfg := Default()
	d := &decoder{lines: map[string]int{}}
	var doc yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc)
	switch {
	case errors.Is(err, io.EOF): // empty file: the defaults
	case err != nil:
		return nil, &Error{Problems: []Problem{{Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}}
	default:
		d = newDecoder(&doc)
		d.decode(&doc, reflect.ValueOf(cfg).Elem(), "")
		if d.blown != nil {
			return nil, &Error{Problems: []Problem{d.aliasProblem()}}
		}
	}
	cfg.addSourceRules(func(path string) bool { _, ok := d.lines[path]; return ok })
	// Validate even when decoding failed (a bad value keeps its default), so
	// that one run reports every problem; a key already reported is skipped.
	problems := d.problems
	if err := validate(cfg); err != nil {
		var ce *Error
		if !errors.As(err, &ce) {
			return nil, err
		}
		for _, p := range ce.Problems {
			if d.reported(p.Path) {
				continue
			}
			p.Line = d.line(p.Path)
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: boundProblems(problems, d.dropped)}
	}
	return cfg, nil
}

// MaxProblems bounds the problems an *Error lists: a file with thousands of
// unknown keys is answered at once, with the first ones and a count.
const MaxProblems = 100

// MaxAliasValues bounds what YAML aliases may add to a document. An alias
// repeats a value by reference, and a few KiB of nested aliases expand to
// millions of values (the "billion laughs"); reusing a rule takes a handful.
const MaxAliasValues = 10_000

// AliasProblem is the one problem of a config whose aliases expand past
// MaxAliasValues: nothing more of it is read.
const AliasProblem = "YAML aliases (*name) expanding to more than 10000 values are not accepted: write the value out"

// countNodes counts the nodes of the parsed document without following
// aliases: the work of reading it once.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, k := range n.Content {
		c += countNodes(k)
	}
	return c
}

// newDecoder returns a decoder for doc, with its budget of node visits:
// the document once, and MaxAliasValues more.
func newDecoder(doc *yaml.Node) *decoder {
	return &decoder{lines: map[string]int{}, budget: countNodes(doc) + MaxAliasValues}
}

// aliasProblem is the problem of a decoder that ran out of its budget.
func (d *decoder) aliasProblem() Problem {
	return Problem{Msg: fmt.Sprintf("%s (*%s)", AliasProblem, d.blown.Value), Line: d.blown.Line}
}

// spend takes the visits of n and everything under it, aliases followed,
// from the budget; false once it is spent (the alias that spent it is in
// d.blown).
func (d *decoder) spend(n *yaml.Node, via *yaml.Node) bool {
	if d.blown != nil {
		return false
	}
	if n.Kind == yaml.AliasNode {
		if via == nil {
			via = n
		}
		return d.spend(n.Alias, via)
	}
	if d.budget--; d.budget < 0 {
		d.blown = via
		if d.blown == nil {
			d.blown = n
		}
		return false
	}
	for _, c := range n.Content {
		if !d.spend(c, via) {
			return false
		}
	}
	return true
}

// boundProblems keeps the first MaxProblems problems and says how many
// more there are, dropped the ones decoding only counted.
func boundProblems(ps []Problem, dropped int) []Problem {
	if len(ps) <= MaxProblems && dropped == 0 {
		return ps
	}
	more := len(ps) + dropped - MaxProblems
	return append(ps[:MaxProblems:MaxProblems], Problem{Msg: fmt.Sprintf("and %d more problems: fix these first", more)})
}

// decoder walks a YAML node tree into a value, so that every unknown key
// and every bad value is reported with its key path, not just the first.
type decoder struct {
	problems []Problem
	dropped  int            // problems past MaxProblems, only counted
	lines    map[string]int // key path → line of its value
	budget   int            // node visits left (see newDecoder)
	via      *yaml.Node     // the outermost alias being followed, if any
	blown    *yaml.Node     // the alias that spent the budget; then nothing more is decoded
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	if len(d.problems) > MaxProblems {
		d.dropped++
		return
	}
	d.problems = append(d.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...), Line: n.Line})
}

// reported tells whether decoding already found a problem at path or under it.
func (d *decoder) reported(path string) bool {
	for _, p := range d.problems {
		if p.Path == path || strings.HasPrefix(p.Path, path+".") || strings.HasPrefix(p.Path, path+"[") {
			return true
		}
	}
	return false
}

// line returns the line of path or of its closest ancestor present in the file.
func (d *decoder) line(path string) int {
	for path != "" {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

var (
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	lineRE          = regexp.MustCompile(`^(yaml: )?(unmarshal errors:\s*)?line \d+: `)
)

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode && d.via == nil {
		d.via = n
		defer func() { d.via = nil }()
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if d.blown != nil {
		return
	}
	if d.budget--; d.budget < 0 {
		d.blown = d.via
		if d.blown == nil {
			d.blown = n
		}
		return
	}
	if path != "" {
		d.lines[path] = n.Line
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		// yaml.v3 follows the aliases under n itself: they are paid first.
		for _, c := range n.Content {
			if !d.spend(c, d.via) {
				return
			}
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.fail(n, path, "%s", lineRE.ReplaceAllString(err.Error(), ""))
		}
		return
	}
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	switch v.Kind() {
	case reflect.Pointer:
		if isNull {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		if isNull {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "want a mapping of keys, got %s", describe(n))
			return
		}
		d.mapping(n, v, path)
	case reflect.Map:
		// A rule (or a list of named queries) in the file replaces the
		// default as a whole; null is an empty one. The names are checked
		// by validation, against the signal set of the whole config.
		if isNull {
			v.Set(reflect.MakeMap(v.Type()))
			return
		}
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "want a mapping of keys, got %s", describe(n))
			return
		}
		d.namedMapping(n, v, path)
	case reflect.Slice:
		if isNull {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	default:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want %s, got %s", want(v.Kind()), describe(n))
			return
		}
		if isNull {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.fail(n, path, "want %s, got %s", want(v.Kind()), describe(n))
		}
	}
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	fields := yamlFields(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		if first, dup := seen[key]; dup {
			d.fail(k, sub, "given twice (first on line %d)", first)
			continue
		}
		seen[key] = k.Line
		idx, ok := fields[key]
		if !ok {
			d.fail(k, sub, "unknown key%s", suggest(key, fields))
			continue
		}
		d.decode(val, v.Field(idx), sub)
	}
}

// namedMapping reads a mapping whose keys are names the file chooses (a
// rule's signals, sensor.prometheus.signals): every key once, each value
// decoded as the map's element type.
func (d *decoder) namedMapping(n *yaml.Node, v reflect.Value, path string) {
	m := reflect.MakeMap(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		sub := path + "." + k.Value
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, sub, "given twice (first on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, elem, sub)
		m.SetMapIndex(reflect.ValueOf(k.Value), elem)
	}
	v.Set(m)
}

// yamlFields maps the yaml key of each field of t to the field's index.
func yamlFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = i
	}
	return m
}

// suggest names the known key closest to a misspelt one.
func suggest(key string, fields map[string]int) string {
	best, bestD := "", 3
	for k := range fields {
		d := editDistance(key, k)
		if len(key) >= 4 && (strings.HasPrefix(k, key) || strings.HasPrefix(key, k)) {
			d = 1
		}
		if d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func want(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + k.String()
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

// LoadLenient reads the config at path over the defaults as well as it can:
// keys it does not know and values it cannot use are skipped, and nothing is
// validated. It is for commands that only need to find a running daemon
// (its socket, pid file and log file) while the file is being edited; such
// commands still report what Load says is wrong. It fails only when the
// file cannot be read or is not YAML.
func LoadLenient(path string) (*Config, error) {
	b, err := ReadConfigFile(path)
	if err != nil {
		return nil, err
	}
	cfg := Default()
	var doc yaml.Node
	err = yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc)
	switch {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, fmt.Errorf("config %s: not valid YAML: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	default:
		d := newDecoder(&doc)
		d.decode(&doc, reflect.ValueOf(cfg).Elem(), "")
		if d.blown != nil {
			return nil, fmt.Errorf("config %s: %s", path, d.aliasProblem())
		}
	}
	return cfg, nil
}

// Offline returns the config that err, an error of Load, is about when
// every problem it names is of kind Machine (files, groups and commands of
// this machine: an admin secret, a vcl_file, control.group,
// control.admin_group, hooks.on_change) or Unsourced (a rule on a signal
// whose source is not configured): commands that talk to no Varnish and
// no daemon (simulate, profiles show) use such a config anyway, so
// thresholds and profiles can be worked on away from the server. Any other
// problem is returned as err.
func Offline(err error) (*Config, error) {
	var ce *Error
	if !errors.As(err, &ce) {
		return nil, err
	}
	for _, p := range ce.Problems {
		if p.Kind == Setting {
			return nil, err
		}
	}
	if ce.File == "" {
		return Default(), nil
	}
	// Every setting decoded and validated: only the file checks failed.
	return LoadLenient(ce.File)
}

package profiles

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// QueryGlobRegex turns a query parameter name glob of drop_query_params
// into a regex (PCRE, as VCL uses) that matches exactly the names it
// matches: "*" is any run of name characters, possibly empty; every other
// character is itself. The caller anchors it between "&" and "=", "&" or
// the end of the query.
func QueryGlobRegex(glob string) (string, error) {
	if glob == "" {
		return "", errors.New("empty parameter name")
	}
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case c == '*':
			b.WriteString(`[^&=]*`)
		case c <= ' ' || c >= 0x7f || strings.IndexByte(`&=#?"{}`, c) >= 0:
			return "", fmt.Errorf("%q: %q cannot be part of a query parameter name as a URL carries it", glob, rune(c))
		default:
			b.WriteString(literal(c))
		}
	}
	return b.String(), nil
}

// queryGlobMatch tells whether name matches glob (QueryGlobRegex's syntax).
func queryGlobMatch(glob, name string) bool {
	head, rest, star := strings.Cut(glob, "*")
	if !star {
		return glob == name
	}
	if !strings.HasPrefix(name, head) {
		return false
	}
	name = name[len(head):]
	parts := strings.Split(rest, "*")
	last := parts[len(parts)-1]
	for _, p := range parts[:len(parts)-1] {
		i := strings.Index(name, p)
		if i < 0 {
			return false
		}
		name = name[i+len(p):]
	}
	return strings.HasSuffix(name, last) && len(name) >= len(last)
}

// CacheURL returns uri (a path and query) as the cache key holds it:
// the parameters of drop_query_params removed (and, when one was, the
// empty ones), the rest sorted as Varnish's std.querysort does and no
// lone "?" when sort_query is on. gearshift purge uses it so that a purge
// of any variant reaches the one copy they all share.
func (p *Options) CacheURL(uri string) string {
	path, query, ok := strings.Cut(uri, "?")
	if !ok {
		return uri
	}
	params := strings.Split(query, "&")
	dropped := slices.DeleteFunc(slices.Clone(params), func(param string) bool {
		name, _, _ := strings.Cut(param, "=")
		return slices.ContainsFunc(p.DropQueryParams, func(g string) bool { return queryGlobMatch(g, name) })
	})
	if len(dropped) < len(params) {
		params = slices.DeleteFunc(dropped, func(param string) bool { return param == "" })
		if len(params) == 0 {
			return path
		}
		query = strings.Join(params, "&")
	}
	if !p.SortQuery || !sortable(query) {
		return path + "?" + query
	}
	if len(params) > 1 {
		// std.querysort orders by bytes, as this does; only two
		// parameters of which one is the other's prefix ("a=1", "a=12")
		// may come out in another order.
		params = slices.DeleteFunc(params, func(param string) bool { return param == "" })
		slices.Sort(params)
		query = strings.Join(params, "&")
	}
	if query == "" {
		return path
	}
	return path + "?" + query
}

// unsortableQueryRE matches a URL whose query sort_query leaves as it
// came: a parameter name given twice, or brackets (PHP's arrays, "a[]=1"),
// where the order of the parameters is part of their meaning and a sorted
// key would hand one order's page to the other. sortable says the same.
const unsortableQueryRE = `\?(?:.*&)?([^=&]+)(?:=[^&]*)?&(?:.*&)?\1(?:[=&]|$)|\?.*(?:\[|%5[bB])`

// sortable tells whether sort_query may sort query (a URL's query, without
// the "?"): see unsortableQueryRE.
func sortable(query string) bool {
	if strings.Contains(query, "[") || strings.Contains(strings.ToLower(query), "%5b") {
		return false
	}
	seen := map[string]bool{}
	for _, param := range strings.Split(query, "&") {
		name, _, _ := strings.Cut(param, "=")
		if name == "" {
			continue
		}
		if seen[name] {
			return false
		}
		seen[name] = true
	}
	return true
}

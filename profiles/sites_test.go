package profiles

import (
	"strings"
	"testing"
)

// The router tries every exact host before any glob, and a narrower glob
// before a wider one, whatever the config's order; its name follows its
// text.
func TestRouterOrder(t *testing.T) {
	routes := []Route{
		{Site: "wide", Hosts: []string{"*.example"}},
		{Site: "narrow", Hosts: []string{"*.shop.example"}},
		{Site: "exact", Hosts: []string{"A.Shop.Example"}},
	}
	p, err := Router(routes)
	if err != nil {
		t.Fatal(err)
	}
	exact := strings.Index(p.VCL, `== "a.shop.example"`)
	narrow := strings.Index(p.VCL, `\.shop\.example$"`)
	wide := strings.Index(p.VCL, `^[^.]+(\.[^.]+)*\.example$"`)
	if exact < 0 || narrow < 0 || wide < 0 || !(exact < narrow && narrow < wide) {
		t.Errorf("order exact %d, narrow %d, wide %d; want exact < narrow < wide in:\n%s", exact, narrow, wide, p.VCL)
	}
	if !strings.HasSuffix(strings.TrimSpace(p.VCL), "return (vcl("+SiteLabel(DefaultSite)+"));\n}") {
		t.Errorf("the router does not end with the default site:\n%s", p.VCL)
	}
	if !strings.HasPrefix(p.Name, RouterPrefix) || p.Name == RouterPrefix {
		t.Errorf("name %q", p.Name)
	}
	again, _ := Router(routes)
	other, _ := Router(routes[:2])
	if again.Name != p.Name || other.Name == p.Name {
		t.Errorf("names %s, %s, %s: want the same text to give the same name, another text another", p.Name, again.Name, other.Name)
	}
}

// Routes the config should have refused are refused here too, never
// written into VCL.
func TestRouterRefuses(t *testing.T) {
	for _, routes := range [][]Route{
		{{Site: DefaultSite, Hosts: []string{"a.example"}}},
		{{Site: "Shop", Hosts: []string{"a.example"}}},
		{{Site: "shop", Hosts: []string{`a.example"); }`}}},
		{{Site: "shop", Hosts: []string{"a*.example"}}},
		{{Site: "shop", Hosts: []string{"*"}}},
	} {
		if p, err := Router(routes); err == nil {
			t.Errorf("Router(%+v) = %s, want an error", routes, p.VCL)
		}
	}
}

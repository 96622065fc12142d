package varnishadm

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseVCLList parses the answer of `vcl.list -j` on a host of
// 300 sites, as varnishd 7.1 lays it out: four VCLs and 301 labels.
func BenchmarkParseVCLList(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`[ 2, ["vcl.list", "-j"], 1764900000.000`)
	for i := range 4 {
		fmt.Fprintf(&sb, ",\n{\n  \"status\": \"available\",\n  \"state\": \"auto\",\n  \"temperature\": \"warm\",\n  \"busy\": 0,\n  \"name\": \"gearshift-light-%064x\",\n  \"labels\": 100\n}", i)
	}
	for i := range 301 {
		fmt.Fprintf(&sb, ",\n{\n  \"status\": \"available\",\n  \"state\": \"label\",\n  \"temperature\": \"warm\",\n  \"busy\": 0,\n  \"name\": \"gearshift-site-site-%d\",\n  \"label\": {\n    \"name\": \"gearshift-light-%064x\",\n    \"refs\": 1\n  }\n}", i, 1)
	}
	sb.WriteString("\n]\n")
	body := sb.String()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		vcls, err := parseVCLList(body)
		if err != nil || len(vcls) != 305 {
			b.Fatalf("%d VCLs, %v; want 305", len(vcls), err)
		}
	}
}

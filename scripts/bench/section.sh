# shellcheck shell=bash
# replace_section FILE SECTION puts SECTION (a "## " heading and what
# follows) at the end of FILE, removing an earlier copy of it (the same
# heading, up to the next "## " heading): a second run replaces the first.
# Sourced by the benchmark scripts that write a section of BENCHMARKS.md.
replace_section() {
	local file=$1 section=$2 head kept
	head=$(head -n1 "$section")
	kept=$(awk -v h="$head" '$0 == h { skip = 1; next } skip && /^## / { skip = 0 } !skip' "$file")
	{ printf '%s\n\n' "$kept"; cat "$section"; } >"$file"
}

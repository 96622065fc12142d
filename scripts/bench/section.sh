# shellcheck shell=bash
# Sourced by the benchmark scripts that write a section of BENCHMARKS.md
# (surge.sh, sites.sh, signals.sh).

# replace_section FILE SECTION [AFTER] puts SECTION (a "## " heading and
# what follows, up to the next "## " heading) into FILE: in place of an
# earlier copy of it (the same heading), else after the section headed
# AFTER when there is one, else at the end. A second run replaces the
# first where it stands.
replace_section() {
	local file=$1 section=$2 after=${3:-} head mode=end out
	head=$(head -n1 "$section")
	if grep -qxF -- "$head" "$file"; then
		mode=replace
	elif [ -n "$after" ] && grep -qxF -- "$after" "$file"; then
		mode=after
	fi
	out=$(awk -v h="$head" -v a="$after" -v sec="$section" -v mode="$mode" '
		function put(l) { if (pend && l != "") print ""; pend = 0; print l; last = l }
		function emit(  l) { while ((getline l < sec) > 0) put(l); close(sec); done = 1; pend = 1 }
		mode == "replace" && $0 == h { skip = 1; emit(); next }
		skip && /^## / { skip = 0 }
		skip { next }
		mode == "after" && $0 == a { in_after = 1; put($0); next }
		in_after && /^## / { in_after = 0; emit() }
		{ put($0) }
		END { if (!done) { if (last != "") print ""; emit() } }
	' "$file")
	printf '%s\n' "$out" >"$file"
}

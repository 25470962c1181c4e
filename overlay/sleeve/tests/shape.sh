#!/bin/sh
# shape.sh - the layout of src/ checked, as the Makefile's `shape` target runs it:
#   1. no .c file of src/ calls into a file that calls back into it, however
#      far round (each file compiled alone, nm: the symbols it needs, resolved
#      to the file that defines them; tsort fails on a loop)
#   2. the same for includes: a file that includes x.h (directly or through
#      another header) depends on x.c
#   3. no function in src/ longer than MAX_LINES (80) lines, signature to
#      closing brace (kernel style: a function's braces stand alone in column 0)
# CC, CFLAGS as the Makefile's; AWSLC=DIR adds the AWS-LC build's files.
# Prints each graph's edges with -v.
set -eu
cd "$(dirname "$0")/.."
max=${MAX_LINES:-80}
verbose=; [ "${1:-}" != -v ] || verbose=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# 1. calls
awslc=; [ -z "${AWSLC:-}" ] || awslc="-DSV_AWSLC"
for c in src/*.c; do
	b=$(basename "$c" .c)
	if [ "$b" = aead_awslc ]; then
		[ -n "$awslc" ] || continue
		inc="-I$AWSLC/include"
	else
		inc=
	fi
	# shellcheck disable=SC2086 # CFLAGS and the flags are lists
	${CC:-cc} ${CFLAGS:--O2 -std=gnu11 -D_GNU_SOURCE -pthread} $awslc $inc -c -o "$tmp/$b.o" "$c"
	nm --defined-only -g "$tmp/$b.o" | awk -v f="$b" 'NF == 3 {print $3, f}' >> "$tmp/defs"
done
sort -o "$tmp/defs" "$tmp/defs"
for o in "$tmp"/*.o; do
	b=$(basename "$o" .o)
	nm -u "$o" | awk '{print $2}' | sort -u | join - "$tmp/defs" |
		awk -v f="$b" '$2 != f {print f ".c", $2 ".c"}'
done | sort -u > "$tmp/calls"

# 2. includes: the headers each file reaches, each header's .c (if it has one)
reach() { # file: the local headers it includes, transitively
	sed -n 's/^#include "\([^"]*\)".*/\1/p' "$1" | while read -r h; do
		[ -f "src/$h" ] || continue
		if ! grep -qx "$h" "$tmp/seen"; then
			echo "$h" >> "$tmp/seen"
			echo "$h"
			reach "src/$h"
		fi
	done
}
for c in src/*.c; do
	: > "$tmp/seen"
	reach "$c" | while read -r h; do
		[ ! -f "src/${h%.h}.c" ] || [ "${h%.h}.c" = "$(basename "$c")" ] ||
			echo "$(basename "$c") ${h%.h}.c"
	done
done | sort -u > "$tmp/includes"

for g in calls includes; do
	[ -z "$verbose" ] || { echo "-- $g"; cat "$tmp/$g"; }
	if tsort "$tmp/$g" > /dev/null 2> "$tmp/err"; then
		echo "shape: $g between src/*.c: $(wc -l < "$tmp/$g") edges, no cycle"
	else
		echo "shape: $g between src/*.c form a cycle:"; cat "$tmp/err"; fail=1
	fi
done

# 3. function lengths
awk '
	FNR == 1 { edge = 1 }
	/^[A-Za-z_]/ && edge && !body { sig = FNR; name = $0 }
	$0 == "{" { start = sig; body = 1 }
	$0 == "}" && body {
		body = 0
		sub(/\(.*/, "", name)
		sub(/.*[ *]/, "", name)
		printf "%d %s:%d %s\n", FNR - start + 1, FILENAME, start, name
	}
	{ edge = $0 == "" || /^}/ || /;$/ || /^#/ || /\*\/$/ }' src/*.c | sort -rn > "$tmp/lengths"
long=$(awk -v max="$max" '$1 > max' "$tmp/lengths")
if [ -n "$long" ]; then
	echo "shape: functions over $max lines:"; echo "$long"; fail=1
else
	echo "shape: no function in src/ over $max lines (longest: $(head -1 "$tmp/lengths"))"
fi
exit $fail

#!/bin/bash
# The layers of pmlib/ call and include only downward.
#
# Folders from the bottom up (doc/design-notes.md, "Layers and files"):
#   core trace comm reduce data sched exec init
# A file may use its own folder and those below it: by #include "folder/..."
# (read from the sources) and by the symbols its object file takes from
# another folder's objects (read with nm from the build). Anything going
# up fails this test: events go up through core's hooks (pm__hooks) and the
# transport's handlers instead.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
srcdir=${srcdir:-.}
layers="core trace comm reduce data sched exec init"

# Upward uses allowed for now, one "folder/file.c symbol-or-header" a line
# (none: every layer calls and includes only downward).
known=""

command -v nm >/dev/null || { echo "layers: nm not found (binutils)"; exit 77; }

rank_of() {
    local i=0
    for l in $layers; do
        [ "$l" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo -1
}

objs=$(ls pmlib/*/libpmlib_core_la-*.o 2>/dev/null)
[ -n "$objs" ] || { echo "layers: no objects under pmlib/ (build first)"; exit 77; }

# Symbol -> folder of the object that defines it.
defs=$(mktemp)
uses=$(mktemp)
trap 'rm -f "$defs" "$uses"' EXIT
for o in $objs; do
    d=${o#pmlib/}; d=${d%%/*}
    nm -g --defined-only "$o" | awk -v d="$d" 'NF == 3 { print $3, d }'
done | sort -u >"$defs"

# Uses: "folder/file.c symbol-or-header target-folder".
for o in $objs; do
    d=${o#pmlib/}; d=${d%%/*}
    f=$(basename "$o" .o); f=${f#libpmlib_core_la-}.c
    nm -u "$o" | awk '{ print $NF }' | sort -u | join - "$defs" |
        awk -v from="$d/$f" '{ print from, $1, $2 }'
done >"$uses"
for s in "$srcdir"/pmlib/*/*.[ch]; do
    rel=${s#"$srcdir"/pmlib/}
    grep -o '^#include "[a-z]*/[a-z_]*\.h"' "$s" | sed 's/#include "//; s/"$//' |
        while read -r h; do echo "$rel $h ${h%%/*}"; done
done >>"$uses"

fail=0
seen=""
while read -r from what to; do
    fd=${from%%/*}
    rf=$(rank_of "$fd")
    rt=$(rank_of "$to")
    [ "$rf" -lt 0 ] || [ "$rt" -lt 0 ] && continue
    [ "$rt" -le "$rf" ] && continue
    if grep -qx "$from $what" <<<"$known"; then
        seen="$seen
$from $what"
        continue
    fi
    echo "layers: $from uses $what of $to/, a layer above $fd/; use a hook (core/internal.h, pm__hooks) or move it"
    fail=1
done <"$uses"

while read -r entry; do
    [ -n "$entry" ] || continue
    if ! grep -qx "$entry" <<<"$seen"; then
        echo "layers: '$entry' no longer goes up; take it off the list in tests/layers.sh"
        fail=1
    fi
done <<<"$known"

n=$(grep -c . <<<"$known")
[ $fail -eq 0 ] && echo "layers: every call and include goes down ($(wc -l <"$uses") uses of other folders; $n allowed up)"
exit $fail

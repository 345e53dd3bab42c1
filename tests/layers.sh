#!/bin/bash
# The layers of pmlib/ call and include only downward.
#
# Folders from the bottom up (doc/design-notes.md, "Layers and files"):
#   core trace comm reduce data sched exec init
# A file may use its own folder and those below it: by #include "folder/..."
# (read from the sources) and by the symbols its object file takes from
# another folder's objects (read with nm from the build). What still goes
# up is listed below by file and symbol or header; anything else going up
# fails this test, and so does an entry of the list that no longer goes up
# (take it off the list).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
srcdir=${srcdir:-.}
layers="core trace comm reduce data sched exec init"

# Upward uses still to be turned into hooks or moved (folder/file use).
known="
core/redistribute.c pm__guard_keep_piece
core/redistribute.c exec/guard.h
core/registry.c pm__model_create
core/registry.c pm__model_destroy
core/registry.c pm__stubs_warm
core/registry.c sched/model.h
core/subscribe.c pm__check_mode
core/task.c pm__chunk_bytes
core/task.c pm__hosts_backlog
core/task.c pm__hosts_backlog_add
core/task.c pm__hosts_cost
core/task.c pm__hosts_note_finish
core/task.c pm__hosts_probe_due
core/task.c pm__model_ns_named
core/task.c pm__ranges_space
core/task.c pm__reduce_check
core/task.c pm__reduce_tree_apply
core/task.c pm__reduce_tree_create
core/task.c pm__reduce_tree_free
core/task.c pm__sched_policy
core/task.c pm__split_by_cost
core/task.c pm__stubs_poll_room
core/task.c pm__trace_span
core/task.c exec/cuda.h
core/task.c reduce/ops.h
core/task.c sched/hosts.h
core/task.c sched/model.h
core/task.c sched/ranges.h
sched/pull.c pm__guard_stalled
sched/pull.c exec/guard.h
"

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
[ $fail -eq 0 ] && echo "layers: every call and include goes down, but for $n known uses in core/ and sched/"
exit $fail

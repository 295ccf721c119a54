# Timed stages for the check scripts in tools/ (source it; bash only).
#
#   stage NAME FUNCTION   run FUNCTION, record its wall time under NAME
#
# On exit the stage times are printed, with the stage that failed if one
# did.  The sourcing script sets STAGES_TITLE (the heading) and STAGES_OK
# (the last line on success) and uses `set -e`.

STAGES=()
TIMES=()
now() { echo "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T_ALL=$(now)
report() {
    local status=$?
    echo
    echo "== ${STAGES_TITLE:-stage times}"
    local i
    for i in "${!STAGES[@]}"; do
        printf '   %-10s %7s s\n' "${STAGES[$i]}" "${TIMES[$i]}"
    done
    printf '   %-10s %7s s\n' "total" "$(elapsed "$T_ALL")"
    if [ "$status" -ne 0 ]; then
        echo "== FAILED (exit $status) in stage: ${CURRENT_STAGE:-setup}"
    else
        echo "== ${STAGES_OK:-all stages passed}"
    fi
}
trap report EXIT

stage() {  # stage NAME FUNCTION: run FUNCTION, record its wall time
    CURRENT_STAGE="$1"
    echo
    echo "== [$1] $(date +%H:%M:%S)"
    local t0
    t0=$(now)
    "$2"
    STAGES+=("$1")
    TIMES+=("$(elapsed "$t0")")
}

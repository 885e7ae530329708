# The checks the CLI test scripts share (sourced by cli.sh and hostile.sh):
# each counts into passed and failed, and says what failed on one line.
passed=0
failed=0

ok() { # ok DESCRIPTION COMMAND...: must exit 0
    local what=$1
    shift
    if "$@" >"$tmp/out" 2>"$tmp/err"; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "FAIL (expected success): $what: $(head -c 300 "$tmp/err")"
    fi
}

refuse() { # refuse DESCRIPTION PATTERN COMMAND...: non-zero, no crash, no hang (300 s), one line naming PATTERN (warnings and notes aside)
    local what=$1 pattern=$2
    shift 2
    timeout 300 "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local lines
    lines=$(grep -vcE '^poet: (warning|note):' "$tmp/err")
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] && [ "$lines" -eq 1 ] && grep -q -- "$pattern" "$tmp/err"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL (expected a one-line error with '$pattern'): $what: rc=$rc stderr=$(head -c 300 "$tmp/err")"
    fi
}

has() { # has DESCRIPTION PATTERN FILE
    if grep -q -- "$2" "$3"; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "FAIL: $1: no '$2' in $3"
    fi
}

expect() { # expect DESCRIPTION CONDITION: the condition (shell code) must hold
    if eval "$2"; then passed=$((passed + 1)); else
        failed=$((failed + 1))
        echo "FAIL: $1"
    fi
}

#!/usr/bin/env bash
# blockflow's one entry point for developers and CI:
#   ./dev.sh run  [args...]   set everything up, then run the main job: the editor (args: blockflow's)
#   ./dev.sh test [args...]   set everything up, then lint-imports + pytest (args go to pytest)
# Set-up: a Python >= 3.11, the Debian packages Qt needs, a venv (.venv or $BLOCKFLOW_VENV)
# with `pip install -e '.[test]'`, redone only when pyproject.toml changes.
# Sourcing this file (in a subshell: it sets -euo pipefail) only defines the functions, so they
# can be tried one by one, e.g. with is_root overridden.

set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=${BLOCKFLOW_VENV:-$ROOT/.venv}
[[ $VENV == /* ]] || VENV=$PWD/$VENV  # the jobs cd to $ROOT
STAMP_NAME=.blockflow-install.sha256

# docs/qt.md §2: what PySide6-Essentials needs to load at all, even offscreen.
QT_PACKAGES=(libglib2.0-0 libegl1 libgl1 libx11-6 libdbus-1-3 libfontconfig1 libfreetype6
             libxkbcommon0 fonts-dejavu-core)
# docs/qt.md §2: the xcb platform plugin, needed to open windows on an X display
# (blockflow/gui/common/x11libs.py names the same packages when the editor finds one missing).
XCB_PACKAGES=(libx11-xcb1 libxcb1 libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1
              libxcb-randr0 libxcb-render0 libxcb-render-util0 libxcb-shape0 libxcb-shm0
              libxcb-sync1 libxcb-util1 libxcb-xfixes0 libxcb-xkb1 libxkbcommon-x11-0)

say() { printf 'dev.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

usage() {
    cat >&2 <<'EOF'
usage: ./dev.sh run  [args...]   set up, then open the editor on the default sample project
                                  (no display: render it to sample_projects/stable_softmax.png);
                                  args replace it: ./dev.sh run check x.bflow.json
       ./dev.sh test [args...]   set up, then run lint-imports and the test suite (args go to pytest)
environment: BLOCKFLOW_VENV (default .venv), BLOCKFLOW_PYTHON (interpreter to build the venv with)
EOF
}

is_root() { [[ $(id -u) -eq 0 ]]; }

# Prints the first interpreter >= 3.11 found (BLOCKFLOW_PYTHON first, if set).
find_python() {
    local cand
    for cand in ${BLOCKFLOW_PYTHON:-} python3.11 python3 python3.12 python3.13 python3.14; do
        if command -v "$cand" >/dev/null 2>&1 &&
           "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
            command -v "$cand"
            return 0
        fi
    done
    return 1
}

# The packages of "$@" that dpkg does not list as installed, one per line.
missing_packages() {
    local pkg
    for pkg in "$@"; do
        if [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null) != ii* ]]; then
            printf '%s\n' "$pkg"
        fi
    done
}

# True when the venv at $VENV runs, is >= 3.11 and has pip.
venv_ok() {
    [[ -x $VENV/bin/python ]] &&
        "$VENV/bin/python" -c 'import sys, importlib.util as u
sys.exit(sys.version_info < (3, 11) or u.find_spec("pip") is None)' >/dev/null 2>&1
}

# The Debian package that provides ensurepip (hence `python -m venv`) for "$1", if it lacks it.
venv_package_needed() {
    local py=$1 ver
    "$py" -c 'import ensurepip' >/dev/null 2>&1 && return 0
    ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    printf 'python%s-venv\n' "$ver"
}

# Installs the missing system packages "$@" (root), or prints the command and stops (non-root).
install_system_packages() {
    (($# == 0)) && return 0
    if is_root; then
        say "installing missing system packages: $*"
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
    else
        say "missing system packages: $*"
        say "install them with:"
        printf '\n    sudo apt-get update && sudo apt-get install -y --no-install-recommends %s\n\n' "$*" >&2
        die "then run ./dev.sh again."
    fi
}

# Checks (and if root, installs) the Debian packages both jobs need. $1 = python.
ensure_system_packages() {
    local py=$1
    # Both jobs want the X11 libraries too: the editor must start after `./dev.sh test` (they are
    # 16 small packages, about 1.3 MB of .deb files).
    local -a wanted=("${QT_PACKAGES[@]}" "${XCB_PACKAGES[@]}") missing=()
    if ! command -v dpkg-query >/dev/null 2>&1; then
        say "not a Debian-like system (no dpkg): not checking system packages; Qt needs" \
            "OpenGL/EGL, fontconfig, freetype, xkbcommon, glib, dbus and a font"
        return 0
    fi
    mapfile -t missing < <(missing_packages "${wanted[@]}")
    if ! venv_ok; then
        mapfile -t -O "${#missing[@]}" missing < <(venv_package_needed "$py")
    fi
    install_system_packages "${missing[@]}"
}

# Creates $VENV, or recreates it when it is broken.
ensure_venv() {
    local py=$1
    venv_ok && return 0
    if [[ -e $VENV ]]; then
        if [[ ! -f $VENV/pyvenv.cfg ]] && [[ -n $(ls -A "$VENV" 2>/dev/null) ]]; then
            die "$VENV exists but is not a virtual environment; move it away or set BLOCKFLOW_VENV"
        fi
        if [[ ! -w $VENV ]]; then
            die "$VENV does not work for user $(id -un) (its python does not run, is older" \
                "than 3.11 or has no pip) and is not theirs to replace: set BLOCKFLOW_VENV to" \
                "another path, or remove it"
        fi
        say "recreating the broken virtual environment $VENV (its python does not run," \
            "is older than 3.11 or has no pip)"
        rm -rf -- "$VENV"
    else
        say "creating the virtual environment $VENV with $py ($("$py" -V 2>&1))"
    fi
    "$py" -m venv "$VENV"
}

pyproject_hash() {
    "$VENV/bin/python" -c 'import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest(), sys.argv[1])' "$ROOT/pyproject.toml"
}

# `pip install -e '.[test]'` unless the venv already has it for this very pyproject.toml.
ensure_installed() {
    local stamp=$VENV/$STAMP_NAME want
    want=$(pyproject_hash)
    if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
        return 0
    fi
    if [[ -f $stamp ]]; then
        say "pyproject.toml changed: reinstalling blockflow (editable) and its test tools into $VENV"
    else
        say "installing blockflow (editable) and its test tools into $VENV (downloads ~400 MB, torch's CPU build the largest)"
    fi
    rm -f -- "$stamp"
    (cd "$ROOT" && PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q -e '.[test]')
    printf '%s\n' "$want" >"$stamp"
}

setup() {
    local job=$1 py
    py=$(find_python) || die "no Python >= 3.11 found (tried python3.11, python3, ...);" \
        "on Debian 12: apt-get install python3 python3-venv"
    ensure_system_packages "$py"
    ensure_venv "$py"
    ensure_installed
}

# The editor on the default sample; without a display it says so and renders the sample to a PNG.
# Arguments replace the sample: `./dev.sh run other.bflow.json`, `./dev.sh run check x.bflow.json`.
run_job() {
    cd "$ROOT"
    if (($#)); then
        exec "$VENV/bin/blockflow" "$@"
    fi
    exec "$VENV/bin/blockflow" sample_projects/stable_softmax.bflow.json
}

# How many processes run the suite (pytest-xdist): BLOCKFLOW_TEST_WORKERS, else one per CPU, at
# most 4 (a worker may hold a ResNet's 100 MB weights twice); 1 runs it in this process.
test_workers() {
    local n=${BLOCKFLOW_TEST_WORKERS:-}
    if [[ -z $n ]]; then
        # (nproc answers OMP_NUM_THREADS when it is set, and the tests set it to 1)
        n=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 1)
        ((n > 4)) && n=4
    fi
    echo "$n"
}

test_job() {
    cd "$ROOT"
    export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
    local lint_rc=0 test_rc=0 workers parallel=()
    workers=$(test_workers)
    # A test file's tests stay together on one worker, in their order (--dist loadfile): the
    # suite's module fixtures are made once, and its GUI tests see the order they were written in.
    ((workers > 1)) && parallel=(-n "$workers" --dist loadfile)
    "$VENV/bin/lint-imports" --no-logo || lint_rc=$?
    "$VENV/bin/python" -m pytest "${parallel[@]}" "$@" || test_rc=$?
    ((lint_rc == 0)) || say "lint-imports failed (exit $lint_rc): a layering contract is broken"
    case $test_rc in
        0) ;;
        5) say "pytest collected no tests (exit 5)" ;;
        *) say "pytest failed (exit $test_rc)" ;;
    esac
    ((test_rc != 0)) && return "$test_rc"
    return "$lint_rc"
}

main() {
    local job=${1:-}
    case $job in
        run | test) shift ;;
        -h | --help | help) usage; return 0 ;;
        *) usage; return 2 ;;
    esac
    setup "$job"
    "${job}_job" "$@"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    main "$@"
fi

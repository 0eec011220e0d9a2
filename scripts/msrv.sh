#!/usr/bin/env bash
# Computes the workspace's true minimum Rust version: the highest `rust-version` declared by any
# package in Cargo.lock that a build and test of the workspace on this machine uses.
#
# For every registry package in Cargo.lock it reads `rust-version` from the package's own
# Cargo.toml in Cargo's source cache (~/.cargo/registry/src/*/<name>-<version>/Cargo.toml; run a
# build first so the sources are there), then takes the maximum over the packages that
# `cargo tree --workspace` lists for the host target with normal, build and dev edges (what
# `cargo build --workspace` and `cargo test --workspace` compile), with default features, again
# with `--all-features` (the optional serde/metrics/async features CI tests), and for CI's loom
# model check (`RUSTFLAGS="--cfg loom"`, which pulls in loom and its own dependencies). Packages
# that declare no `rust-version` are counted and named, not guessed.
#
# Usage: scripts/msrv.sh [-v]   (-v: print every used package's rust-version)
set -euo pipefail
cd "$(dirname "$0")/.."
verbose=${1:-}
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"

# name version -> rust-version ("-" when undeclared, "?" when the source is not in the cache).
declared() {
    local toml
    toml=$(ls -d "$registry"/*/"$1-$2"/Cargo.toml 2>/dev/null | head -n 1 || true)
    if [[ -z $toml ]]; then echo "?"; return; fi
    # The [package] table's rust-version (Cargo normalizes published manifests to a plain string).
    awk '/^\[/{p=($0=="[package]")} p && /^rust-version *=/{gsub(/[" ]/,"",$0); sub(/^rust-version=/,"",$0); print; f=1; exit} END{if(!f) print "-"}' "$toml"
}

# Every registry package in the lockfile, as "name version".
lock_packages() {
    awk '/^\[\[package\]\]/{n="";v="";s=""} /^name = /{n=$3} /^version = /{v=$3} /^source = "registry/{print n, v}' Cargo.lock | tr -d '"' | sort -u
}

# The packages a build and test uses, as "name version" (host target; arguments go to cargo tree).
used_packages() {
    cargo tree --locked --offline -e normal,build,dev --prefix none --format '{p}' "$@" 2>/dev/null |
        awk '{v=$2; sub(/^v/,"",v); print $1, v}' | sort -u
}

report() {
    local label=$1; shift
    local max=0 max_pkgs="" undeclared=() missing=()
    while read -r name version; do
        local rv
        rv=$(declared "$name" "$version")
        [[ -n $verbose ]] && printf '  %-28s %-10s %s\n' "$name" "$version" "$rv"
        case $rv in
            "?") missing+=("$name-$version") ;;
            "-") undeclared+=("$name-$version") ;;
            *)
                if [[ $rv == "$max" ]]; then max_pkgs+=" $name-$version"
                elif [[ $(printf '%s\n%s\n' "$max" "$rv" | sort -V | tail -n 1) == "$rv" ]]; then
                    max=$rv; max_pkgs="$name-$version"
                fi ;;
        esac
    done < <(comm -12 <(lock_packages) <(used_packages "$@"))
    echo "$label: rust-version $max (declared by: $max_pkgs)"
    echo "  ${#undeclared[@]} used packages declare no rust-version${undeclared:+: ${undeclared[*]}}"
    if ((${#missing[@]})); then
        echo "  not in the source cache (run cargo build first): ${missing[*]}" >&2
        exit 1
    fi
}

all_max="0"
while read -r name version; do
    rv=$(declared "$name" "$version")
    [[ $rv == "?" || $rv == "-" ]] && continue
    if [[ $(printf '%s\n%s\n' "$all_max" "$rv" | sort -V | tail -n 1) == "$rv" ]]; then all_max=$rv; fi
done < <(lock_packages)
echo "every registry package in Cargo.lock (any target, any feature): highest rust-version $all_max"
report "used by cargo build/test --workspace (default features)" --workspace
report "used with --all-features" --workspace --all-features
RUSTFLAGS="--cfg loom" report "used by the loom model check (RUSTFLAGS=\"--cfg loom\", -p turnstile)" -p turnstile

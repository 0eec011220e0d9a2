#!/bin/bash
# Reproduces nothing by itself: packs sysbench for a device without a package registry (used by 2026-11-26b-run.sh).
# Packs Debian's sysbench 1.0 with its libraries (all but glibc's) and Lua scripts into DIR,
# with a wrapper `sysbench-apart` that runs it pinned to $SB_CPUS (default 8-15), so that a
# machine without a package registry (the lent device) can run `repro oltp --client sysbench`
# with the client on CPUs apart from the server's:
#   SB_CPUS=8-15 TURNSTILE_SYSBENCH=DIR/sysbench-apart taskset -c 0-7 turnstile repro oltp \
#       --client sysbench ...
# Needs sysbench installed here (`apt-get install sysbench`). The device must have a glibc at
# least as new as this machine's (it runs our binary built here, so it does).
# Usage: sysbench-bundle.sh DIR   (e.g. target/sb-bundle; carry it to the device)
set -eu
DIR=${1:?target folder}
SB=$(command -v sysbench || true)
[ -n "$SB" ] || { echo "sysbench is not installed: sudo apt-get install sysbench" >&2; exit 1; }
LUA=/usr/share/sysbench
[ -d "$LUA" ] || { echo "no $LUA: is this Debian's sysbench package?" >&2; exit 1; }
mkdir -p "$DIR/lib" "$DIR/lua"
cp "$SB" "$DIR/sysbench"
cp "$LUA"/*.lua "$DIR/lua/"
for l in $(ldd "$SB" | awk '/=>/ {print $3}'); do
    case $(basename "$l") in
    libc.so* | libm.so* | libpthread.so* | libresolv.so* | libdl.so* | ld-linux*) ;;
    *) cp -L "$l" "$DIR/lib/" ;;
    esac
done
cat >"$DIR/sysbench-apart" <<'WRAP'
#!/bin/bash
# sysbench from this bundle, pinned to $SB_CPUS (default 8-15), apart from the server's CPUs.
D=$(dirname "$(readlink -f "$0")")
cd "$D/lua" || exit 1
args=()
for a in "$@"; do
    case $a in oltp_* | select_* | bulk_*) [ -f "$D/lua/$a.lua" ] && a=$D/lua/$a.lua ;; esac
    args+=("$a")
done
exec taskset -c "${SB_CPUS:-8-15}" env LD_LIBRARY_PATH="$D/lib" "$D/sysbench" "${args[@]}"
WRAP
chmod +x "$DIR/sysbench-apart"
SB_CPUS=0 "$DIR/sysbench-apart" --version

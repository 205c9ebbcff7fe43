#!/bin/sh
# A PostgreSQL cluster of your own in one directory, for trying rudder on
# one machine and for the tests' throwaway clusters (crates/testkit/src/pg.rs runs
# the server's programs through this script). Works as a normal user and as
# root: PostgreSQL refuses to run as root (`initdb: cannot be run as root`),
# so as root the server's programs run as the `postgres` user that Debian's
# package creates, and the directory is given to that user.
#
#   eval "$(scripts/pg-local.sh up)"   # a new cluster in a temp dir; sets
#                                      # RUDDER_STORE and PG_LOCAL_DIR
#   scripts/pg-local.sh down "$PG_LOCAL_DIR"   # stop it and remove the dir
#
#   scripts/pg-local.sh up DIR         # the same in DIR (new or empty)
#   scripts/pg-local.sh bindir         # where initdb and pg_ctl are
#   scripts/pg-local.sh run PROGRAM [ARG...]   # initdb, pg_ctl, ... of that
#                                      # directory, as the server's user
#   scripts/pg-local.sh own PATH       # give PATH to the server's user (root)
#
# The server programs are looked for in $RUDDER_PG_BINDIR when it is set
# (and only there), else `pg_config --bindir`, the newest
# /usr/lib/postgresql/*/bin (Debian keeps them off PATH), then PATH.
# The cluster listens on a unix socket in its directory only (no TCP port),
# trusts local connections, and its superuser is `rudder`.
set -eu

me=${0##*/}

die() {
    printf '%s: %s\n' "$me" "$*" >&2
    exit 1
}

has_programs() {
    [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ]
}

bindir() {
    if [ -n "${RUDDER_PG_BINDIR:-}" ]; then
        has_programs "$RUDDER_PG_BINDIR" || die "no initdb and pg_ctl in RUDDER_PG_BINDIR=$RUDDER_PG_BINDIR"
        printf '%s\n' "$RUDDER_PG_BINDIR"
        return
    fi
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        if [ -n "$d" ] && has_programs "$d"; then
            printf '%s\n' "$d"
            return
        fi
    fi
    newest=
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
        has_programs "$d" && newest=$d
    done
    if [ -n "$newest" ]; then
        printf '%s\n' "$newest"
        return
    fi
    old_ifs=$IFS
    IFS=:
    for d in $PATH; do
        if [ -n "$d" ] && has_programs "$d"; then
            IFS=$old_ifs
            printf '%s\n' "$d"
            return
        fi
    done
    IFS=$old_ifs
    die "no PostgreSQL server programs (initdb, pg_ctl) found: install them (Debian: apt-get install postgresql) or set RUDDER_PG_BINDIR"
}

is_root() {
    [ "$(id -u)" -eq 0 ]
}

server_user_exists() {
    id postgres >/dev/null 2>&1 || die "running as root, and there is no postgres user to run the server as (PostgreSQL refuses root): install Debian's postgresql package, or create one (useradd --system postgres)"
}

# Run one of the server's programs as the server's user.
run() {
    [ $# -ge 1 ] || die "run: which program?"
    program=$1
    shift
    case $program in
        */*) ;;
        *) program=$(bindir)/$program ;;
    esac
    if is_root; then
        server_user_exists
        exec runuser -u postgres -- "$program" "$@"
    fi
    exec "$program" "$@"
}

own() {
    [ $# -ge 1 ] || die "own: which path?"
    if is_root; then
        server_user_exists
        chown postgres: "$@"
    fi
}

up() {
    if [ $# -ge 1 ]; then
        dir=$1
        mkdir -p "$dir"
        [ -z "$(ls -A "$dir")" ] || die "up: $dir is not empty"
    else
        dir=$(mktemp -d "${TMPDIR:-/tmp}/rudder-pg.XXXXXX")
    fi
    dir=$(cd "$dir" && pwd)
    # The cluster trusts every connection on its socket: only its owner
    # (and root) may reach the directory the socket is in.
    chmod 700 "$dir"
    own "$dir"
    ( run initdb -D "$dir/data" -U rudder -E UTF8 --locale=C --auth=trust --no-instructions ) >"$dir/initdb.log" 2>&1 ||
        die "initdb failed: see $dir/initdb.log"
    ( run pg_ctl -D "$dir/data" -l "$dir/server.log" -w -o "-k '$dir' -c listen_addresses=" start ) >/dev/null 2>&1 ||
        die "the server did not start: see $dir/server.log"
    printf '%s: a PostgreSQL cluster in %s, on the unix socket there; stop it and remove the dir with: %s down %s\n' \
        "$me" "$dir" "$0" "$dir" >&2
    printf "export PG_LOCAL_DIR='%s'\n" "$dir"
    printf "export RUDDER_STORE='postgres://rudder@/postgres?host=%s'\n" "$dir"
}

down() {
    [ $# -eq 1 ] || die "down: which directory?"
    dir=$1
    [ -f "$dir/data/PG_VERSION" ] || die "down: $dir holds no cluster made by '$me up'"
    ( run pg_ctl -D "$dir/data" -w -m fast stop ) >/dev/null 2>&1 || true
    rm -rf "$dir"
}

[ $# -ge 1 ] || die "usage: $me up [DIR] | down DIR | bindir | run PROGRAM [ARG...] | own PATH"
command=$1
shift
case $command in
    up) up "$@" ;;
    down) down "$@" ;;
    bindir) bindir ;;
    run) run "$@" ;;
    own) own "$@" ;;
    *) die "unknown command $command: up, down, bindir, run or own" ;;
esac

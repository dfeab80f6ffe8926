#!/usr/bin/env bash
# Installs shardrep as a systemd service (the README's Install section):
#   PREFIX/bin/shardrep, PREFIX/bin/shardrepctl     the binaries (release build)
#   UNIT_DIR/shardrep@.service                      conf/shardrep@.service
#   CONFIG_DIR/example.toml                         conf/example.toml, only when
#                                                   there is none (an existing
#                                                   file is kept as it is)
#   PREFIX/share/doc/shardrep/                      README.md, shardrep.toml
#                                                   (every configuration key)
# and the system user and group shardrep the unit runs as, when missing.
# The unit and the example name the Debian package's paths (/usr/bin,
# /usr/share/doc, /etc/shardrep): they are installed with PREFIX and
# CONFIG_DIR written in place of /usr and /etc/shardrep.
#
# Running it again installs the binaries, unit and documents again and keeps
# the configuration and the user. With --dest-dir every file goes under a
# staging root (packaging, tests: no root needed) and nothing else is done.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: scripts/install.sh [OPTIONS]

Builds shardrep (cargo build --release) and installs it as a systemd service.

Options:
  --prefix DIR      install the binaries into DIR/bin and the documents into
                    DIR/share/doc/shardrep (default: /usr/local)
  --unit-dir DIR    install shardrep@.service into DIR
                    (default: /etc/systemd/system)
  --config-dir DIR  the services' configurations; example.toml is installed
                    there unless it exists (default: /etc/shardrep)
  --dest-dir DIR    staging root: write every file under DIR (DIR/usr/local/bin,
                    ...) while the unit names the final paths; no user is
                    created, no owner changed, systemd not reloaded
  --no-build        install the release binaries already built in
                    target/release (or $CARGO_TARGET_DIR/release)
  --binaries DIR    install shardrep and shardrepctl from DIR (implies
                    --no-build)
  --no-user         do not create the user shardrep
  -h, --help        show this help

As root, with the defaults, the installed service of configuration
/etc/shardrep/NAME.toml is started with: systemctl enable --now shardrep@NAME
EOF
}

die() {
    echo "install.sh: $*" >&2
    exit 1
}

prefix=/usr/local
unit_dir=/etc/systemd/system
config_dir=/etc/shardrep
dest_dir=
build=1
binaries=
create_user=1
user=shardrep

# The value of option $1, given as $2.
value() {
    [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"
    printf '%s' "$2"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$(value "$@"); shift 2 ;;
        --unit-dir) unit_dir=$(value "$@"); shift 2 ;;
        --config-dir) config_dir=$(value "$@"); shift 2 ;;
        --dest-dir) dest_dir=$(value "$@"); shift 2 ;;
        --no-build) build=0; shift ;;
        --binaries) binaries=$(value "$@"); build=0; shift 2 ;;
        --no-user) create_user=0; shift ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done

# Paths written into the unit: absolute, and nothing systemd or sed would
# read as syntax (whitespace, quotes, %, \, #, &).
for pair in "--prefix:$prefix" "--unit-dir:$unit_dir" "--config-dir:$config_dir"; do
    option=${pair%%:*}
    path=${pair#*:}
    case "$path" in
        /*) ;;
        *) die "$option $path: must be an absolute path" ;;
    esac
    case "$path" in
        *[[:space:]\"\'%\\\#\&]*) die "$option $path: spaces, quotes and the characters % \\ # & are not allowed" ;;
    esac
done
# Without the trailing /: the prefix / is then empty (/bin/shardrep).
prefix=${prefix%/}
config_dir=${config_dir%/}
[ -n "$config_dir" ] || die "--config-dir /: give a directory of its own"
# --dest-dir and --binaries as given, relative to the directory this was run in.
if [ -n "$dest_dir" ]; then
    mkdir -p "$dest_dir" || die "--dest-dir $dest_dir: cannot create it"
    dest_dir=$(cd "$dest_dir" && pwd)
    [ "$dest_dir" != / ] || dest_dir=
fi
staged=${dest_dir:+1}
case "$binaries" in
    "" | /*) ;;
    *) binaries=$PWD/$binaries ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ -z "$staged" ] && [ "$(id -u)" != 0 ]; then
    for dir in "${prefix:-/}" "$unit_dir" "$config_dir"; do
        probe=$dir
        while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
        [ -w "$probe" ] || die "cannot write $dir as $(id -un): run as root, or give --dest-dir DIR to stage the files"
    done
fi

# The binaries.
if [ -z "$binaries" ]; then
    binaries=${CARGO_TARGET_DIR:-target}/release
    if [ "$build" = 1 ]; then
        command -v cargo >/dev/null ||
            die "cargo not found: install Rust (https://rustup.rs), or build as another user with 'cargo build --release' and run this with --no-build"
        echo "== cargo build --release --locked --bins"
        cargo build --release --locked --bins || die "cargo build --release failed (above)"
    fi
fi
for bin in shardrep shardrepctl; do
    [ -x "$binaries/$bin" ] || {
        if [ "$build" = 0 ] && [ "$binaries" = "${CARGO_TARGET_DIR:-target}/release" ]; then
            die "$binaries/$bin: not built: run 'cargo build --release' first, or leave out --no-build"
        fi
        die "$binaries/$bin: no such executable"
    }
done

# conf/FILE with /usr and /etc/shardrep replaced by the chosen paths.
render() {
    sed -e "s#/usr/bin/#$prefix/bin/#g" -e "s#/usr/share/doc/#$prefix/share/doc/#g" \
        -e "s#/etc/shardrep/#$config_dir/#g" \
        -e "s#/etc/shardrep\$#$config_dir#g" "conf/$1"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bin_dir=$dest_dir$prefix/bin
doc_dir=$dest_dir$prefix/share/doc/shardrep
units=$dest_dir$unit_dir
configs=$dest_dir$config_dir

install -d -m 0755 "$bin_dir" "$doc_dir" "$units"
for bin in shardrep shardrepctl; do
    install -m 0755 "$binaries/$bin" "$bin_dir/$bin"
    echo "installed $bin_dir/$bin"
done
render shardrep@.service >"$tmp/unit"
grep -q "^ExecStart=$prefix/bin/shardrep run --config $config_dir/%i.toml\$" "$tmp/unit" ||
    die "conf/shardrep@.service: no line 'ExecStart=/usr/bin/shardrep run --config /etc/shardrep/%i.toml' to install"
install -m 0644 "$tmp/unit" "$units/shardrep@.service"
echo "installed $units/shardrep@.service"
install -m 0644 README.md "$doc_dir/README.md"
install -m 0644 conf/shardrep.toml "$doc_dir/shardrep.toml"
echo "installed $doc_dir/README.md, shardrep.toml"

# The user: before the configuration, whose group it is.
if [ -z "$staged" ] && [ "$create_user" = 1 ]; then
    if getent passwd "$user" >/dev/null; then
        echo "user $user exists"
    else
        useradd --system --user-group --home-dir /var/lib/shardrep --no-create-home \
            --shell /usr/sbin/nologin --comment "shardrep replication applier" "$user" ||
            die "useradd $user failed (above)"
        echo "created system user $user"
    fi
fi
# The configuration directory and files are readable by group shardrep
# (the service) only: they name passwords files and hold the topology.
group=
if [ -z "$staged" ] && getent group "$user" >/dev/null; then group=$user; fi
install -d -m 0750 ${group:+-g "$group"} "$configs"
render example.toml >"$tmp/example.toml"
if [ -e "$configs/example.toml" ]; then
    if cmp -s "$tmp/example.toml" "$configs/example.toml"; then
        echo "$configs/example.toml is up to date"
    else
        echo "kept $configs/example.toml (it differs from conf/example.toml, which is not installed)"
    fi
else
    install -m 0640 ${group:+-g "$group"} "$tmp/example.toml" "$configs/example.toml"
    echo "installed $configs/example.toml"
fi

if [ -n "$staged" ]; then
    echo "staged under $dest_dir: a package must also create the system user $user"
    echo "(useradd --system --user-group --no-create-home $user) and give $config_dir to group $user"
elif [ "$unit_dir" = /etc/systemd/system ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    echo "systemd reloaded"
else
    echo "systemd is not running here (or the unit is not in /etc/systemd/system): no daemon-reload"
fi

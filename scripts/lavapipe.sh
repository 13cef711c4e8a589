#!/usr/bin/env bash
# Mesa's software Vulkan driver (lavapipe) in a private folder, so the WebGPU tests (kernels, the step
# runner) run on a machine without a GPU. Debian bookworm's own mesa-vulkan-drivers lacks a feature Dawn
# needs, so the driver comes from bookworm-backports. Nothing of the system changes: apt reads a sources
# list and keeps its package lists and downloads in a temporary folder (the user's apt sources, lists and
# dpkg database are untouched), and the packages are unpacked with dpkg -x into the private folder.
#
#   bash scripts/lavapipe.sh install         unpack it (once) into $T2S_LAVAPIPE_DIR; prints the folder
#   bash scripts/lavapipe.sh env             the export lines that point Dawn at it (eval "$(...)")
#   bash scripts/lavapipe.sh run CMD [ARG]   run CMD with them, e.g. run node scripts/run-tests.mjs test/backend
#
# T2S_LAVAPIPE_DIR defaults to ~/.cache/t2s-lab/lavapipe. Needs apt-get, dpkg and Debian's archive keyring.
set -euo pipefail

dir="${T2S_LAVAPIPE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/t2s-lab/lavapipe}"
icd="$dir/lvp_icd.json"
libdir="$dir/lib"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

say() { echo "lavapipe: $*" >&2; }

installed() { [ -f "$icd" ] && [ -f "$dir/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" ] && [ -e "$libdir/libvulkan.so.1" ]; }

install() {
  installed && return 0
  for tool in apt-get dpkg; do
    command -v "$tool" >/dev/null 2>&1 || { say "needs $tool (a Debian or Ubuntu system); see environment.md, 'WebGPU tests without a GPU'"; exit 1; }
  done
  [ -f "$keyring" ] || { say "needs Debian's archive keyring ($keyring, package debian-archive-keyring)"; exit 1; }
  [ "$(dpkg --print-architecture)" = amd64 ] || { say "only amd64 is set up here (this machine: $(dpkg --print-architecture))"; exit 1; }
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/parts"
  cat >"$tmp/parts/debian.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates bookworm-backports
Components: main
Signed-By: $keyring
EOF
  # a private view of apt: this sources list only, lists and downloads in $tmp; the dpkg status stays the
  # system's, so only what this machine lacks is downloaded
  local apt=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts" -o Dir::State::Lists="$tmp/lists"
    -o Dir::Cache="$tmp/cache" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o Debug::NoLocking=1 -o APT::Sandbox::User=root -qq)
  say "fetching mesa-vulkan-drivers and libvulkan1 from bookworm-backports into $dir"
  timeout 300 apt-get "${apt[@]}" update
  timeout 600 apt-get "${apt[@]}" install --download-only -y --no-install-recommends -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
  rm -rf "$dir/root"
  mkdir -p "$dir/root"
  local n=0
  for deb in "$tmp"/cache/archives/*.deb; do
    # the C and C++ runtimes stay the system's: a newer copy on LD_LIBRARY_PATH would shadow node's own
    case "$(basename "$deb")" in libc6_* | libgcc-s1_* | libstdc++6_*) continue ;; esac
    dpkg -x "$deb" "$dir/root"
    n=$((n + 1))
  done
  [ -f "$dir/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" ] || { say "the packages hold no libvulkan_lvp.so"; exit 1; }
  # the library path holds the Vulkan loader and only the unpacked libraries the system lacks, so no
  # other program of the run (Chromium, Python) picks up a private copy of a library it already has
  rm -rf "$libdir"
  mkdir -p "$libdir"
  for lib in "$dir"/root/usr/lib/x86_64-linux-gnu/*.so* "$dir"/root/lib/x86_64-linux-gnu/*.so*; do
    [ -e "$lib" ] || continue
    name="$(basename "$lib")"
    if [ "$name" = libvulkan.so.1 ] || { [ ! -e "/lib/x86_64-linux-gnu/$name" ] && [ ! -e "/usr/lib/x86_64-linux-gnu/$name" ]; }; then
      ln -sf "$lib" "$libdir/$name"
    fi
  done
  # the packaged ICD names the library without a folder; this one names the private copy
  cat >"$icd" <<EOF
{ "file_format_version": "1.0.0", "ICD": { "library_path": "$dir/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so", "api_version": "1.3.0" } }
EOF
  say "unpacked $n packages"
}

envlines() {
  echo "export VK_DRIVER_FILES='$icd'"
  echo "export LD_LIBRARY_PATH='$libdir'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  # Mesa's window-system code asks for a runtime folder; a bare CI shell has none
  echo "export XDG_RUNTIME_DIR=\"\${XDG_RUNTIME_DIR:-/tmp}\""
}

case "${1:-}" in
  install) install; echo "$dir" ;;
  env) install; envlines ;;
  run)
    shift
    [ $# -gt 0 ] || { say "run needs a command"; exit 2; }
    install
    eval "$(envlines)"
    exec "$@"
    ;;
  *) echo "usage: bash scripts/lavapipe.sh install | env | run CMD [ARG...]" >&2; exit 2 ;;
esac

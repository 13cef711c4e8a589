#!/usr/bin/env bash
# Installs the system packages the kit uses beside npm: Jupyter pieces (to register the tslab kernel, to
# run notebooks with standard tooling, and `jupyter trust` from jupyter-nbformat, which signs executed
# notebooks so Jupyter shows their figures; the classic Notebook, where the tests open a stored report) and
# Chromium (static figure export). Safe to run again: it installs
# only what is missing. On systems without apt-get it says what to install by hand and exits 0, because
# the kit's own notebook runner and everything else work without these packages.
set -u
pkgs=(python3-nbclient jupyter-client jupyter-nbconvert jupyter-nbformat python3-ipykernel jupyter-notebook chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-system: all system packages present (${pkgs[*]})"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-system: no apt-get here; install these yourself for kernel registration and figure export: ${missing[*]}" >&2
  echo "setup-system: the kit's own notebook runner, CLI and tests that do not need them still work." >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup-system: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# another apt run (a second checkout's setup) holds the dpkg lock for a while: wait for it instead of failing
lock=(-o DPkg::Lock::Timeout=600)
$sudo apt-get "${lock[@]}" update -qq && $sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
status=$?
[ $status -eq 0 ] || echo "setup-system: apt-get failed (exit $status); install by hand: ${missing[*]}" >&2
exit $status

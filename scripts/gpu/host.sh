# What every GPU-host script here shares (sourced, from the checkout's root, after OUT is set): the unpacked
# bundle of `npm run bundle:gpu -- --node --pack --no-data`, the Vulkan loader debs in .gpu/debs, one log.
root="$(pwd)"
mkdir -p "$OUT"
B=/tmp/gb/gpu-bundle
export T2S_DEBS="$root/.gpu/debs" T2S_BACKEND=webgpu
log() { echo "$*" | tee -a "$OUT/log.txt"; }
timed() { # label, command...: runs it into the log, then logs its seconds and exit status
  local label="$1"; shift
  local t0=$(date +%s)
  "$@" >> "$OUT/log.txt" 2>&1
  local rc=$?
  log "== $label rc $rc $(( $(date +%s) - t0 )) s"
  return $rc
}

# unpacks out/gpu-bundle.tar.xz, points its data/ at the checkout's, and records the GPU
setup() {
  mkdir -p /tmp/gb && tar -xJf out/gpu-bundle.tar.xz -C /tmp/gb
  [ -e "$B/data" ] || ln -s "$root/data" "$B/data"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$OUT/log.txt"
}

t2s() { bash "$B/run.sh" t2s.mjs "$@"; }

#!/usr/bin/env bash
# launch/install-deps.sh: installs every Debian 12 package that gearbox's build and tests need.
# Idempotent and non-interactive: it installs only what is missing and says what that is.
# CUDA (nvcc, CUB, NCCL) is not a Debian package: the build uses it when nvcc is on PATH.
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config git
  libzmq3-dev libmsgpack-dev libyaml-dev libtorch-dev
  libjansson-dev  # JSON that gearbox reads back (summaries, benchmark results)
  # the trainers' process group (workers/torch/group.cpp): c10d's ProcessGroupGloo header
  # includes Gloo's headers, which Debian ships apart from libtorch-dev
  libgloo-dev
  # libtorch's BLAS: without OpenBLAS, Debian's libblas.so.3 is the slow reference BLAS
  # (measured: the default run went from ~22k to ~165k env steps/s). The serial build, because
  # gearbox runs one BLAS user per worker process and several workers share the cores.
  libopenblas0-serial
  libhdf5-dev  # D4RL ingest of the data server
  # TensorBoard event files (runtime/run/tensorboard.proto: protoc-c at build time, libprotobuf-c)
  protobuf-c-compiler libprotobuf-c-dev
  # gearbox plot (launch/cmd_plot.c) draws with gnuplot's pngcairo terminal
  gnuplot-nox
  python3-dev  # libpython3.11 to embed: the gymnasium environment plugin (envs/gymnasium)
  # tests: fuzzing (clang + libFuzzer runtime), python reference scripts and clients
  clang libclang-rt-14-dev python3 python3-numpy python3-venv
  # the data server's Python client (pyzmq, msgpack) and its PyTorch example
  python3-zmq python3-msgpack python3-torch
  # gearbox dataset export's test reads the D4RL HDF5 it writes; Minari datasets in tests
  python3-h5py
  # tests/launch/run_hosts.sh: network namespaces, veth and a bridge (ip), pkill (procps)
  iproute2 procps
  # tests/launch/run_slurm.sh: a one-node Slurm cluster of its own (daemons, clients, munge
  # authentication), started from a temporary directory; none of their services is started here
  munge slurmctld slurmd slurm-client
  # gearbox eval --video and experiment.eval_every: H.264 encoding (ffmpeg), frame counts in
  # tests/launch/run_eval.sh (ffprobe, from the same package)
  ffmpeg
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root to install packages (try: sudo $0)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: apt-get/dpkg not found: this script is for Debian 12 (bookworm)." >&2
  echo "install-deps: needed packages: ${packages[*]}" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

# Python packages Debian does not ship (launch/python-requirements.txt) go into gearbox's own
# virtual environment, never into the system's Python. Features and tests that need them run
# ${GEARBOX_VENV}/bin/python (CMake's GEARBOX_PYTHON).
GEARBOX_VENV=${GEARBOX_VENV:-/opt/gearbox/python}
requirements="$(dirname "$0")/python-requirements.txt"
python_packages() {
  local wanted stamp
  wanted=$(grep -v '^[[:space:]]*\(#\|$\)' "$requirements" | sed 's/[[:space:]]*#.*//' || true)
  stamp="$GEARBOX_VENV/.gearbox-requirements"
  if [ -x "$GEARBOX_VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    echo "install-deps: the Python environment $GEARBOX_VENV is up to date"
    return 0
  fi
  [ -x "$GEARBOX_VENV/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$GEARBOX_VENV"
  if [ -n "$wanted" ]; then
    echo "install-deps: installing Python packages into $GEARBOX_VENV:" $wanted
    # shellcheck disable=SC2086
    "$GEARBOX_VENV/bin/python" -m pip install -q --disable-pip-version-check $wanted </dev/null
  fi
  printf '%s' "$wanted" > "$stamp"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  python_packages
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Debian's postinst scripts start the services they install (munged, slurmctld, slurmd) through
# invoke-rc.d; a policy-rc.d that denies (exit 101) keeps them stopped: the tests start their own
# daemons with their own files. One already there (Docker images have one) is left as it is.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# launch/install-deps.sh: no service starts while it installs\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
echo "install-deps: installed ${#missing[@]} packages"
python_packages

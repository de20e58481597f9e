#!/usr/bin/env bash
# launch/install-deps.sh: installs the Debian 12 packages gearbox needs, grouped by purpose.
#
#   launch/install-deps.sh              what building and running gearbox needs (group "run")
#   launch/install-deps.sh GROUP...     "run" and the named groups (below)
#   launch/install-deps.sh --all        every group: optional features and the tests (.ci/run)
#   launch/install-deps.sh --list       the groups and their packages; installs nothing
#
# Idempotent and non-interactive: it installs only what is missing and says what that is.
# CUDA (nvcc, CUB, NCCL) is not a Debian package: the build uses it when nvcc is on PATH.
set -euo pipefail

# run: the build (compiler, CMake and the libraries gearbox links) and what the default features
# need at run time. libtorch-dev alone brings ~420 packages on a bare Debian 12 (it pulls
# python3-dev, HDF5's library and the video codecs' libraries in), so the features that cost a
# handful of packages more are here rather than optional.
group_run=(
  build-essential cmake pkg-config
  libzmq3-dev libmsgpack-dev libyaml-dev libtorch-dev
  libjansson-dev  # JSON that gearbox reads back (summaries, benchmark results)
  # the trainers' process group (workers/torch/group.cpp): c10d's ProcessGroupGloo header
  # includes Gloo's headers, which Debian ships apart from libtorch-dev
  libgloo-dev
  # libtorch's BLAS: without OpenBLAS, Debian's libblas.so.3 is the slow reference BLAS
  # (measured: the default run went from ~22k to ~165k env steps/s). The serial build, because
  # gearbox runs one BLAS user per worker process and several workers share the cores.
  libopenblas0-serial
  # TensorBoard event files (runtime/run/tensorboard.proto: protoc-c at build time, libprotobuf-c)
  protobuf-c-compiler libprotobuf-c-dev
  libhdf5-dev  # the data server's D4RL and Minari datasets, gearbox dataset export
  gnuplot-nox  # gearbox plot (launch/cmd_plot.c) draws with gnuplot's pngcairo terminal
  python3-dev  # libpython3.11 to embed: the gymnasium environment plugin (envs/gymnasium)
)
# video: gearbox eval --video and experiment.eval_every's videos (H.264 encoding; ~50 packages)
group_video=(ffmpeg)
# gymnasium: Gymnasium environments (env.name: gymnasium) need the gymnasium Python package, from
# PyPI (launch/python-requirements.txt) in gearbox's own virtual environment (below); so do the
# built-in MuJoCo environments (PyPI's mujoco: configure the build after installing it)
group_gymnasium=(python3-venv)
# client: the data server's Python client (pyzmq, msgpack), its PyTorch and NumPy examples
group_client=(python3-zmq python3-msgpack python3-torch python3-numpy)
# python: the gearbox Python package (launch/python: runs, sweeps and tracking from Python,
# docs/guide/python.md) installed into gearbox's virtual environment, with only what it needs
# (PyYAML) and PyTorch for custom models (gearbox.export_model, run(model=...)): Debian's, the
# same 1.13 as the libtorch the workers load (a TorchScript file from a newer PyTorch may not
# load there), seen by the venv through its system site packages; on top of group run's
# libtorch it adds about 130 MB. Its optional parts (Optuna, matplotlib, MLflow, W&B) come with
# the gymnasium or tests groups' packages (launch/python-requirements.txt)
group_python=(python3-venv python3-yaml python3-torch)
# tests: everything the ctest suite and .ci/run use beyond the groups above
group_tests=(
  git
  # fuzzing (clang + libFuzzer runtime), python reference scripts
  clang libclang-rt-14-dev python3 python3-numpy python3-venv
  # LLVM's linker: a build with the tests links libtorch about 60 times, 8x less CPU than GNU ld
  # (cmake/GearboxOptions.cmake, GEARBOX_LINKER)
  lld
  # gearbox dataset export's test reads the D4RL HDF5 it writes; Minari datasets in tests
  python3-h5py
  # tests/launch/run_hosts.sh: network namespaces, veth and a bridge (ip), pkill (procps)
  iproute2 procps
  # tests/launch/run_slurm.sh: a one-node Slurm cluster of its own (daemons, clients, munge
  # authentication), started from a temporary directory; none of their services is started here
  munge slurmctld slurmd slurm-client
)
all_groups=(run video gymnasium client python tests)
# Groups whose features run Python packages from launch/python-requirements.txt (the venv)
venv_groups=" gymnasium tests "

usage() {
  echo "usage: launch/install-deps.sh [--all | --list | GROUP...]   (groups: ${all_groups[*]})"
}
groups=(run)
case "${1:-}" in
  --all) groups=("${all_groups[@]}"); shift ;;
  --list)
    for g in "${all_groups[@]}"; do
      declare -n list="group_$g"
      echo "$g: ${list[*]}"
    done
    exit 0 ;;
  -h|--help) usage; exit 0 ;;
esac
for g in "$@"; do
  if [[ " ${all_groups[*]} " != *" $g "* ]]; then
    echo "install-deps: unknown group or option '$g'" >&2
    usage >&2
    exit 2
  fi
  [[ " ${groups[*]} " == *" $g "* ]] || groups+=("$g")
done

packages=()
want_venv=0
for g in "${groups[@]}"; do
  declare -n list="group_$g"
  for p in "${list[@]}"; do
    [[ " ${packages[*]} " == *" $p "* ]] || packages+=("$p")
  done
  [[ "$venv_groups" != *" $g "* ]] || want_venv=1
done

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: must run as root to install packages (try: sudo $0 $*)" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: apt-get/dpkg not found: this script is for Debian 12 (bookworm)." >&2
  echo "install-deps: needed packages: ${packages[*]}" >&2
  exit 1
fi
echo "install-deps: groups ${groups[*]}"

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

# Python packages Debian does not ship (launch/python-requirements.txt) go into gearbox's own
# virtual environment, never into the system's Python. Features and tests that need them run
# ${GEARBOX_VENV}/bin/python (CMake's GEARBOX_PYTHON, chosen when the build is configured: a
# build configured before the environment existed must be configured again).
GEARBOX_VENV=${GEARBOX_VENV:-/opt/gearbox/python}
requirements="$(dirname "$0")/python-requirements.txt"
make_venv() {
  [ -x "$GEARBOX_VENV/bin/python" ] ||
    /usr/bin/python3 -m venv --system-site-packages "$GEARBOX_VENV"
}
python_packages() {
  local wanted stamp
  wanted=$(grep -v '^[[:space:]]*\(#\|$\)' "$requirements" | sed 's/[[:space:]]*#.*//' || true)
  stamp="$GEARBOX_VENV/.gearbox-requirements"
  if [ -x "$GEARBOX_VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    echo "install-deps: the Python environment $GEARBOX_VENV is up to date"
    return 0
  fi
  make_venv
  if [ -n "$wanted" ]; then
    echo "install-deps: installing Python packages into $GEARBOX_VENV:" $wanted
    # shellcheck disable=SC2086
    "$GEARBOX_VENV/bin/python" -m pip install -q --disable-pip-version-check $wanted </dev/null
  fi
  printf '%s' "$wanted" > "$stamp"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Debian's postinst scripts start the services they install (munged, slurmctld, slurmd) through
  # invoke-rc.d; a policy-rc.d that denies (exit 101) keeps them stopped: the tests start their
  # own daemons with their own files. One already there (Docker images have one) is left as is.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# launch/install-deps.sh: no service starts while it installs\nexit 101\n' \
      > "$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
  echo "install-deps: installed ${#missing[@]} packages"
fi
[ "$want_venv" = 0 ] || python_packages
# the Python package, into the same environment (made here when no other group made it)
if [[ " ${groups[*]} " == *" python "* ]]; then
  make_venv
  echo "install-deps: installing the gearbox Python package into $GEARBOX_VENV"
  "$GEARBOX_VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "$(dirname "$0")/python" </dev/null
fi

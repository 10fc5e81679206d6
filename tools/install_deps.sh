#!/usr/bin/env bash
# Installs what the build, the tests and the docs need, and nothing that is
# already there. Called by `make deps` (and so by `make demo` / `make test`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# --- Debian packages -------------------------------------------------------
# NB: chromium is the browser of `make docs-browser-test` (tools/browser_test.py);
# clang and its runtime libraries (libFuzzer) build `make fuzz`.
packages=(g++ cmake ninja-build ccache doxygen graphviz chromium libgtest-dev clang-format
          clang libclang-rt-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "install_deps: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Python packages -------------------------------------------------------
# NB: torch releases are named exactly, in requirements/torch.txt and only
# there; asking pip for an unpinned torch would pull a multi-GB CUDA build.
# Without TORCH_VERSION, an installed torch of a supported release (major and
# minor as one of the file's) is kept, and the file's first release is
# installed if there is none. With TORCH_VERSION (and VENV, as the Makefile
# sets them) that release goes into a virtual environment of its own, which
# is kept between runs.
supported=$(sed -n 's/^torch==//p' requirements/torch.txt)
default_torch=$(echo "$supported" | head -n 1)
if [ -n "${TORCH_VERSION:-}" ]; then
  VENV=${VENV:?TORCH_VERSION needs VENV}
  if [ ! -x "$VENV/bin/python" ]; then
    echo "install_deps: creating $VENV for torch==$TORCH_VERSION"
    python3 -m venv "$VENV"
  fi
  PYTHON="$VENV/bin/python"
fi
have_torch=$("$PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ -n "${TORCH_VERSION:-}" ]; then
  want_torch=$TORCH_VERSION
elif [ -n "$have_torch" ] && echo "$supported" | cut -d. -f1,2 | grep -qxF "$(echo "$have_torch" | cut -d. -f1,2)"
then
  want_torch=$have_torch
else
  want_torch=$default_torch
fi
if [ "$have_torch" != "$want_torch" ]; then
  echo "install_deps: installing torch==$want_torch (found '${have_torch:-none}'; supported: '$(echo $supported)')"
  if [ -n "${TORCH_VERSION:-}" ]; then
    # NB: an extra release is a CUDA build: about 3 GB of wheels, 5.4 GB
    # installed. Both are kept outside the clone, made once per machine and
    # never changed after: the wheels in one folder per release (pip's own
    # cache does not keep files that large; `pip download` checks every file
    # already there against the index's sha256 and fetches again any that
    # differs), and their install in one folder per release and Python ABI
    # (the pins are exact), which the venv reads through a .pth file. A clean
    # clone then makes its venv without torch's 5 GB, and torch's headers
    # keep one path from clone to clone: ccache and Inductor's kernel cache
    # (keyed by the compiler's command line, include paths included) find
    # what the last clone compiled.
    cache="${ACCINTE_TORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/torch_accinte}"
    abi=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    installed="$cache/site/torch-$want_torch-$abi"
    if [ ! -e "$installed/.complete" ]; then
      wheels="$cache/wheels/torch-$want_torch"
      mkdir -p "$wheels" "$cache/site"
      "$PYTHON" -m pip download -q --disable-pip-version-check --dest "$wheels" "torch==$want_torch"
      # NB: a full disk surfaces as pip's "No space left on device" halfway
      # through the install, after minutes. Say it before starting.
      need_gib=${ACCINTE_TORCH_FREE_GIB:-6}
      free_gib=$(df -Pk "$cache/site" | awk 'NR == 2 { print int($4 / 1048576) }')
      if ((free_gib < need_gib)); then
        echo "install_deps: torch==$want_torch needs about $need_gib GiB in $cache/site" \
          "(a CUDA build); only $free_gib GiB are free on its disk. Free space and run again." >&2
        exit 1
      fi
      # NB: installed aside, then renamed into place: a run stopped halfway
      # leaves no folder that looks complete, and of two clones installing
      # at once, the second's rename fails and its copy is dropped.
      # The copies of runs killed halfway (their process gone) go first.
      for stale in "$installed".partial.*; do
        [ -e "$stale" ] && ! kill -0 "${stale##*.}" 2>/dev/null && rm -rf "$stale"
      done
      partial="$installed.partial.$$"
      mkdir "$partial"
      trap 'rm -rf "$partial"' EXIT
      "$PYTHON" -m pip install -q --disable-pip-version-check --no-index --find-links "$wheels" \
        --target "$partial" "torch==$want_torch"
      touch "$partial/.complete"
      mv -T "$partial" "$installed" 2>/dev/null || rm -rf "$partial"
      trap - EXIT
    fi
    site_packages=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    echo "$installed" > "$site_packages/accinte_torch_release.pth"
  else
    "$PYTHON" -m pip install -q --disable-pip-version-check "torch==$want_torch"
  fi
fi
# pip resolves against the installed torch and installs only what is missing.
"$PYTHON" -m pip install -q --disable-pip-version-check \
  -r requirements/build.txt -r requirements/test.txt -r requirements/docs.txt

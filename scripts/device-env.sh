# Sourced by the device scripts: install carried wheels (.whl/, see ../shared/device/wheels.sh) into /tmp/site,
# put them and src/ on PYTHONPATH, unbuffer Python, and make sure Triton compiles (never the interpreter) on the GPU.
WHL=${WHL:-.whl}  # a folder of wheels carried to the device (WHL=.whl25: a subset when the tree is near the limit)
if ls "$WHL"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site "$WHL"/*.whl 2>/dev/null
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
export PYTHONUNBUFFERED=1
unset TRITON_INTERPRET
# Bytecode, as an installed torch has it: the device image's torch ships no .pyc and its sandbox sets
# PYTHONDONTWRITEBYTECODE, so every process (a command, each worker, the reference process, each compile worker)
# compiled torch's sources again at import (4.66 s of one process's import was compile(), docs/device-runs/
# 2026-11-24-h100/integrity.md). Now written once per call under /tmp, then read by every later process.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/kp-pycache

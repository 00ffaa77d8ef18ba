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

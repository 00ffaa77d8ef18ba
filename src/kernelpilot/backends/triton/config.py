"""The one place that knows Triton's launch options: flat configs <-> ``triton.Config``, and autotuner pinning.

kernelpilot handles a config as one flat dict (``{"BLOCK_M": 128, "num_warps": 4, "num_stages": 3}``); Triton splits
it into meta-parameters (``Config.kwargs``, passed to the kernel as constexprs) and launch options (attributes of
``triton.Config``: ``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg``; Triton's ``Config.all_kwargs``).
"""

from __future__ import annotations

from typing import Any

#: ``triton.Config`` attributes that are launch options rather than meta-parameters.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")

Config = dict[str, Any]


def split_config(config: Config) -> tuple[Config, Config]:
    """(meta-parameters, launch options) of a flat config."""
    meta = {k: v for k, v in config.items() if k not in LAUNCH_OPTIONS}
    return meta, {k: config[k] for k in LAUNCH_OPTIONS if k in config}


def autotune_config_dict(config: Any) -> Config:
    """A ``triton.Config`` as one flat dict: its meta-parameters plus ``num_warps``/``num_stages`` (and
    ``num_ctas``/``maxnreg`` when set; ``num_ctas=1`` is Triton's default and left out)."""
    flat = dict(config.kwargs)
    for key in LAUNCH_OPTIONS:
        value = getattr(config, key, None)
        if value is not None and not (key == "num_ctas" and value == 1):
            flat[key] = value
    return flat


def to_triton_config(config: Config) -> str:
    """A flat config as a ``triton.Config`` line: meta-parameters in the dict, launch options as keyword arguments
    (``triton.Config({'BLOCK_M': 128}, num_warps=4, num_stages=3)``)."""
    meta, launch = split_config(config)
    return f"triton.Config({meta!r}{''.join(f', {k}={v!r}' for k, v in launch.items())})"


def pinned_config(listed: list[Any], config: Config) -> Any:
    """The ``triton.Config`` to pin an autotuner to for the flat ``config``.

    Args:
        listed: the autotuner's ORIGINAL configs (as written in ``@triton.autotune(configs=[...])``).
        config: the flat config to run.

    Returns:
        The listed ``triton.Config`` object whose flat dict equals ``config`` (the very object: its ``pre_hook``,
        e.g. the Hopper attention tutorial's TMA block-shape hook, and any other attribute come with it). A config
        that is in no listed entry gets a new ``triton.Config`` that copies ``pre_hook`` from the listed config with
        the same meta-parameters (else the first one setting the same meta-parameter names): the hook belongs to
        the kernel's arguments, not to the launch options.
    """
    import triton

    for cand in listed:
        if autotune_config_dict(cand) == config:
            return cand
    meta, launch = split_config(config)
    same_meta = [c for c in listed if dict(c.kwargs) == meta]
    same_keys = [c for c in listed if set(c.kwargs) == set(meta)]
    donor = (same_meta or same_keys or [None])[0]
    return triton.Config(meta, **launch, pre_hook=getattr(donor, "pre_hook", None))

"""The Triton backend (``.py`` kernel files): loading, autotuner discovery, launch options and pinning."""

from kernelpilot.backends.triton.autotune import autotune_space, find_autotuner
from kernelpilot.backends.triton.backend import TritonBackend, use_interpreter
from kernelpilot.backends.triton.config import (LAUNCH_OPTIONS, autotune_config_dict, pinned_config, split_config,
                                                to_triton_config)

__all__ = ["LAUNCH_OPTIONS", "TritonBackend", "autotune_config_dict", "autotune_space", "find_autotuner",
           "pinned_config", "split_config", "to_triton_config", "use_interpreter"]

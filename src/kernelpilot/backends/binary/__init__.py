"""Readers of a compiled GPU binary that every back end shares, below the back ends so they use them without
reaching up into :mod:`kernelpilot.profile`:

- :mod:`~kernelpilot.backends.binary.arch`: arch names (``sm_90``), the default target, max threads per block;
- :mod:`~kernelpilot.backends.binary.tools`: ``cuobjdump`` / ``ptxas`` found, run and read;
- :mod:`~kernelpilot.backends.binary.sass`: SASS parsing and the instruction mix;
- :mod:`~kernelpilot.backends.binary.occupancy`: theoretical occupancy by the CUDA occupancy-calculator rules;
- :mod:`~kernelpilot.backends.binary.models`: the records a compile for a target gives (``StaticReport``,
  ``StaticFailure``, ``StaticSpace``).
"""

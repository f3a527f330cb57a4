"""Units of the engine's numbers: array type aliases named for what they hold, and unit conversions.

The performance model is vectorised over layouts, so almost every quantity is a float64 array with one entry
per layout. The aliases below are the same numpy type (mypy does not tell them apart); they say the unit a
function takes and returns, so a signature reads ``-> Seconds`` rather than ``-> Arr``. Record fields carry
the unit in their name as well (``_s``, ``_bytes``, ``_flops``, ``_params``, ...: engine/performance/README.md).

Bottom layer of the engine (with errors, budget and version): imports numpy only.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt

Arr: TypeAlias = npt.NDArray[np.float64]  # one float per layout, unit stated by the alias below or the name
BoolArr: TypeAlias = npt.NDArray[np.bool_]  # one flag per layout

Seconds: TypeAlias = Arr
Bytes: TypeAlias = Arr
Flops: TypeAlias = Arr  # floating-point operations (a multiply-add counts 2)
BytesPerSecond: TypeAlias = Arr
Count: TypeAlias = Arr  # a dimensionless count: tokens, parameters, elements, ranks, layers, micro-batches
Ratio: TypeAlias = Arr  # a dimensionless fraction or factor

# ------------------------------------------------------------------------------------------ conversions
BITS_PER_BYTE = 8.0
GIGA = 1e9  # decimal giga: catalog Gb/s, GB/s and GB are 1e9
TERA = 1e12  # decimal tera: catalog TFLOP/s and TB/s
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0

# Guard for ratios of non-negative quantities that can both be zero (an empty term): x / max(y, TINY).
# Far below any time, byte or FLOP count the model produces, so it never changes a non-degenerate ratio.
TINY = 1e-30

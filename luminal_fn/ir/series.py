"""Taylor coefficients the front end writes functions with near 0 (where their exp forms cancel, or
once their argument is reduced there).

A contract between ``luminal_fn.numpy`` (which writes ``tanh`` and ``expm1`` as a select between
one of these series and an exp form, and ``arctan`` as a series after reducing its argument) and
backends that recognise those forms as the function itself (``backends/numpy/tree_peephole.py``
calls ``np.tanh`` / ``np.expm1``, ``peephole_odd.py`` ``np.arctan``): both read the coefficients
here, so the two cannot drift apart.
"""
from __future__ import annotations

import math

# tanh(x) = x * (1 + z * (c1 + z * (c2 + ...))), z = x^2: the coefficients of x^3 .. x^11. Below
# |x| = 0.3 the next term is 2e-9 of the value.
TANH = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925)
TANH_BELOW = 0.3

# expm1(x) = x * (1/1! + x * (1/2! + ...)): 1/1! .. 1/10!. Below |x| = 1/2 x^11 / 11! is 1e-11
# of the value.
EXPM1 = tuple(1.0 / math.factorial(k) for k in range(1, 11))
EXPM1_BELOW = 0.5

# arctan(t) = t * (1 + z * (c1 + z * (c2 + ...))), z = t^2, once |x| is reduced to t <= tan(pi/12)
# (1/|x| above 1, then (t sqrt(3) - 1) / (t + sqrt(3)) above tan(pi/12)): the coefficients of
# t^3 .. t^11.
ARCTAN = (-1 / 3, 1 / 5, -1 / 7, 1 / 9, -1 / 11)
ARCTAN_REDUCED_BELOW = 0.2679491924311227  # tan(pi/12)

"""Flow-level simulator of collective traffic on the cluster's real topology (issue #13).

``from simulations.engine.flowsim import simulate`` — see :func:`simulations.engine.flowsim.simulate.simulate`.
Pure numpy; no Django. The method and its limits are in docs/flowsim.md.
"""

from simulations.engine.flowsim.network import TIERS, Network, network_for
from simulations.engine.flowsim.placement import GROUPS, PLACEMENTS
from simulations.engine.flowsim.simulate import FLOWSIM_VERSION, simulate
from simulations.engine.flowsim.study import STANDARD_VARIANTS, quote, study
from simulations.engine.flowsim.traffic import TRAFFIC

__all__ = [
    "FLOWSIM_VERSION", "GROUPS", "PLACEMENTS", "STANDARD_VARIANTS", "TIERS", "TRAFFIC", "Network", "network_for", "quote",
    "simulate", "study",
]

"""Flow-level simulator of collective traffic on the cluster's real topology (issue #13).

``from engine.flowsim.simulate import simulate`` — see :func:`engine.flowsim.simulate.simulate`.
Pure numpy; no Django. The method and its limits are in docs/flowsim.md.
"""

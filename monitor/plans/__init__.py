"""Before and after a run: how many trials it will take, and release gates.

``outcomes`` is what a plan assumes about the models' outcomes; ``rollout``
plays the run's stopping rule forward on many simulated runs at once;
``plan`` turns those into the expected trials, the share of pairs resolved
and the smallest gap resolved with 80 % power; ``gate`` decides whether a
candidate model may replace a baseline, under the run's error control.
"""

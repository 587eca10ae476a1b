"""What a run's counts mean: order, groups, pairs, events, and what to run next.

``decide`` turns posteriors into decisions; ``events`` the facts a look fires
once; ``allocation`` the plan that ``next`` answers.
"""

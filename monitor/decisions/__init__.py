"""What a run's counts mean: order, groups, pairs, events, and what to run next.

``decide`` turns posteriors (``model``'s value types) into decisions, a look
at a time (``look``: the field and its boundary tests; ``links``: the pairs
linked for good); ``forecast`` the trials the open decisions still need;
``events`` the facts a look fires once; ``allocation`` the plan that
``next`` answers.
"""

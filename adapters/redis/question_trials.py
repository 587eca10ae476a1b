"""One question's trials from the Redis store's ``trials`` hash (see
:mod:`monitor.stores.question_trials`).

The hash has one field per trial, the JSON ``[model, question, prior,
trial]`` (as :mod:`adapters.redis.scripts` writes it), holding the
category; costs are summed per model (``costs``) and times are not kept.
The fields of one question are found with ``HSCAN ... MATCH`` on its JSON
text, then checked field by field (a model name could hold the same text).
The scan visits every trial of the run (1.5 to 2.5 us each in Redis on a
loaded 2-core VM, ``benchmarks/question_trials.py``), in slices of
:data:`SCAN_COUNT` (a few ms of Redis each) so that no call holds it long.
"""

from __future__ import annotations

import json
import re
from typing import Final

import redis
from redis.cluster import RedisCluster

from adapters.redis import keys
from monitor.stores.question_trials import QuestionTrial, QuestionTrials

KEPT_BY_REDIS: Final = "category (Redis keeps no per-trial cost or time)"
SCAN_COUNT: Final = 2000
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def read_question_trials(
    client: redis.Redis | RedisCluster, prefix: str, run: str, question: str
) -> QuestionTrials:
    """The run's trials of ``question`` (one ``HSCAN`` pass over the run's trials)."""
    quoted = _GLOB_SPECIAL.sub(r"\\\1", json.dumps(question))
    found = []
    for field, value in client.hscan_iter(
        keys.trials(prefix, run), match=f"*,{quoted},[01],*", count=SCAN_COUNT
    ):
        model, asked, prior, trial = json.loads(field)
        if asked == question:
            found.append(QuestionTrial(model, trial, bool(prior), int(value)))
    found.sort(key=lambda t: (t.model, t.prior, t.trial))
    return QuestionTrials(found, KEPT_BY_REDIS)

"""lm-evaluation-harness ``--log_samples`` output as trial events.

``LmEvalSamples`` reads a samples file or an output directory (optionally
following it for new files), ``read_results`` a results file.
"""

from adapters.lm_eval.records import LmEvalOptions
from adapters.lm_eval.results import LmEvalResults, TaskScore, read_results
from adapters.lm_eval.samples import LmEvalSamples, read_lm_eval

__all__ = [
    "LmEvalOptions",
    "LmEvalResults",
    "LmEvalSamples",
    "TaskScore",
    "read_lm_eval",
    "read_results",
]

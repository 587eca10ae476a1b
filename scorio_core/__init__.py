"""scorio_core: the pure math of scorio-monitor.

Count tables, the closed-form Bayes@N posterior, the Pass@k family, pairwise
comparison and ranking. Only the standard library, NumPy and SciPy are used;
no I/O, clocks or hidden randomness.
"""

from scorio_core.comparison import (
    ci_groups,
    competition_ranks,
    convergence_at_n,
    kendall_tau,
    order_by_mu,
    order_confidence,
    ranking_confidence,
    z_score,
    z_threshold,
)
from scorio_core.counts import CountTable, category_counts
from scorio_core.metrics import avg, avg_ci, bayes, bayes_ci
from scorio_core.passk import (
    Credit,
    credit_estimate,
    credit_posterior,
    g_pass_at_k_tau,
    g_pass_at_k_tau_ci,
    mg_pass_at_k,
    mg_pass_at_k_ci,
    pass_at_k,
    pass_at_k_ci,
    pass_hat_k,
    pass_hat_k_ci,
)
from scorio_core.posterior import (
    Posterior,
    ScaledWeights,
    credible_interval,
    posterior_from_counts,
    z_value,
)

__all__ = [
    "CountTable",
    "Credit",
    "Posterior",
    "ScaledWeights",
    "avg",
    "avg_ci",
    "bayes",
    "bayes_ci",
    "category_counts",
    "ci_groups",
    "competition_ranks",
    "convergence_at_n",
    "credible_interval",
    "credit_estimate",
    "credit_posterior",
    "g_pass_at_k_tau",
    "g_pass_at_k_tau_ci",
    "kendall_tau",
    "mg_pass_at_k",
    "mg_pass_at_k_ci",
    "order_by_mu",
    "order_confidence",
    "pass_at_k",
    "pass_at_k_ci",
    "pass_hat_k",
    "pass_hat_k_ci",
    "posterior_from_counts",
    "ranking_confidence",
    "z_score",
    "z_threshold",
    "z_value",
]

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
from scorio_core.credit import Credit, credit_estimate, credit_posterior
from scorio_core.geometric import (
    geo_spectrum_at_k,
    geo_spectrum_at_k_ci,
    geo_spectrum_star_at_k,
    geo_spectrum_star_at_k_ci,
    geom_at_k,
    geom_at_k_ci,
    geom_ds_at_k,
    geom_ds_at_k_ci,
)
from scorio_core.maxreward import max_at_k, max_at_k_ci
from scorio_core.metrics import avg, avg_ci, bayes, bayes_ci
from scorio_core.passk import (
    g_pass_at_k,
    g_pass_at_k_ci,
    g_pass_at_k_tau,
    g_pass_at_k_tau_ci,
    mg_pass_at_k,
    mg_pass_at_k_ci,
    pass_at_k,
    pass_at_k_ci,
    pass_hat_k,
    pass_hat_k_ci,
    unanimous_at_k,
    unanimous_at_k_ci,
)
from scorio_core.posterior import (
    Posterior,
    ScaledWeights,
    credible_interval,
    posterior_from_counts,
    z_value,
)
from scorio_core.spectrum import (
    auc_at_k,
    auc_at_k_ci,
    maj_at_k,
    maj_at_k_ci,
    threshold_spectrum_at_k,
    threshold_spectrum_at_k_ci,
)
from scorio_core.storage import CountStorage
from scorio_core.taildraws import TailPassDraws
from scorio_core.tailpass import tailpass_empirical
from scorio_core.tailprofile import TailPassProfile, tailpass

__all__ = [
    "CountStorage",
    "CountTable",
    "Credit",
    "Posterior",
    "ScaledWeights",
    "TailPassDraws",
    "TailPassProfile",
    "auc_at_k",
    "auc_at_k_ci",
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
    "g_pass_at_k",
    "g_pass_at_k_ci",
    "g_pass_at_k_tau",
    "g_pass_at_k_tau_ci",
    "geo_spectrum_at_k",
    "geo_spectrum_at_k_ci",
    "geo_spectrum_star_at_k",
    "geo_spectrum_star_at_k_ci",
    "geom_at_k",
    "geom_at_k_ci",
    "geom_ds_at_k",
    "geom_ds_at_k_ci",
    "kendall_tau",
    "maj_at_k",
    "maj_at_k_ci",
    "max_at_k",
    "max_at_k_ci",
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
    "tailpass",
    "tailpass_empirical",
    "threshold_spectrum_at_k",
    "threshold_spectrum_at_k_ci",
    "unanimous_at_k",
    "unanimous_at_k_ci",
    "z_score",
    "z_threshold",
    "z_value",
]

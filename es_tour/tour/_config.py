"""TourConfig: the validated settings of one TOUR run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from es_tour.errors import ConfigError
from es_tour.options import check_bool, check_int, check_number, from_options

VARIANTS = ("hard", "soft")
DEFAULT_VARIANT = "hard"
MAX_K = 10_000  # the engines' own index.max_result_window
MAX_ROUNDS = 100
MEMORIES = ("round", "all")
STOP_RULES = ("top1", "top10")


def check_variant(variant: str) -> str:
    """variant itself, or ConfigError listing the valid options."""
    if variant not in VARIANTS:
        raise ConfigError(f"tour variant must be one of {list(VARIANTS)}, got {variant!r}")
    return variant


@dataclass(frozen=True)
class TourConfig:
    """Settings of TOUR (Sung et al. 2023), checked once when built.

    variant: "hard" (pseudo-positive set, Eq. 11) or "soft" (KL to pseudo-labels, Eq. 13).
    lr: initial learning rate, decayed linearly to 0 over max_rounds.
    k: how many top results are labelled and used in the loss.
    max_rounds: the most query updates per query.
    tau: temperature of the pseudo-label softmax over phi.
    p: probability mass the hard pseudo-positive set must reach.
    momentum, weight_decay: SGD settings, as in torch.optim.SGD.
    lam: weight of the normalised labeler score in the final ranking; 1 - lam goes to sim.
    scale: the retriever's softmax is P_k(c|q) = softmax(scale q.c); cosine retrievers are
        trained with one (sentence-transformers: 20), the paper's is 1.
    standardize: z-score phi over the docs in the loss before softmax(phi / tau), so tau
        means the same for cosine and logit labelers.
    explore: each round labels only docs no earlier round labelled (it retrieves deeper
        past them), so every round's k pairs are new.
    memory: "round" puts the round's k docs in the loss (the paper); "all" puts every doc
        labelled so far (ReFIT, Reddy et al. 2023: the labeler's distribution distilled
        into the query vector).
    stop: "top1" is the paper's early stop (hard: the top-1 is a pseudo-positive; soft:
        the top-1 has the highest phi); "top10" stops after a round that changes nothing
        in the top-10 by phi of every doc labelled.
    budget: the most labeler pairs per query (None: k per round, max_rounds + 1 rounds);
        the round that reaches it labels only what is left and is the last.

    The paper's configuration: scale=1, standardize=False, explore=False, memory="round",
    stop="top1", budget=None. The defaults differ in scale, explore, stop and budget,
    chosen on SciFact train at 20 pairs per query (docs/retrieval.md): with the paper's
    stop most queries end at round 0, where TOUR is rerank of the top k; exploring, the
    round after labels k docs the moved query brings in.
    """

    # the index settings' names of lam, tau and p, which requests and method strings take too
    USER_NAMES: ClassVar[dict[str, str]] = {"lambda": "lam", "temperature": "tau",
                                            "threshold": "p"}

    variant: str = DEFAULT_VARIANT
    lr: float = 0.2
    k: int = 10  # the plugin's index.tour.k default: labelling cost grows with k
    max_rounds: int = 3
    tau: float = 0.5
    p: float = 0.5
    momentum: float = 0.99
    weight_decay: float = 0.01
    # make bench's train sweep: nDCG@10 rises monotonically with lam (0.7053 at 0 to 0.7128
    # at 1) when the labeler is much stronger than the retriever, as the default one is
    lam: float = 1.0
    scale: float = 5.0
    standardize: bool = False
    explore: bool = True
    memory: str = "round"
    stop: str = "top10"
    budget: int | None = 20  # with k=10: round 0, then one round of 10 new docs

    def __post_init__(self) -> None:
        check_variant(self.variant)
        for name, allowed in (("memory", MEMORIES), ("stop", STOP_RULES)):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"tour.{name} must be one of {list(allowed)}, got {value!r}")
        for name in ("standardize", "explore"):
            check_bool(f"tour.{name}", getattr(self, name))
        if self.budget is not None:
            check_int("tour.budget", self.budget, 1, MAX_K * MAX_ROUNDS)
        check_int("tour.k", self.k, 1, MAX_K)
        check_int("tour.max_rounds", self.max_rounds, 1, MAX_ROUNDS)
        # bounds past which the update overflows or does nothing, not taste
        check_number("tour.lr", self.lr, 1e-6, 100)
        check_number("tour.tau", self.tau, 1e-3, 1000)
        check_number("tour.scale", self.scale, 1e-3, 1000)
        check_number("tour.p", self.p, 1e-6, 1)
        check_number("tour.momentum", self.momentum, 0, 0.999)
        check_number("tour.weight_decay", self.weight_decay, 0, 100)
        if self.lr * self.weight_decay > 1:  # q then grows by |1 - lr·wd| a step: overflow
            raise ConfigError(f"tour.lr × tour.weight_decay must be <= 1, got {self.lr} × "
                              f"{self.weight_decay}")
        check_number("tour.lam", self.lam, 0, 1)

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> TourConfig:
        """Build from user options; unknown keys are rejected with the supported ones."""
        return from_options(cls, options, prefix="tour ")

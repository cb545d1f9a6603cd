"""TourConfig: the validated settings of one TOUR run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from es_tour.errors import ConfigError
from es_tour.options import from_options

VARIANTS = ("hard", "soft")
DEFAULT_VARIANT = "hard"
MEMORIES = ("round", "all")
STOP_RULES = ("top1", "top10")


def check_variant(variant: str) -> str:
    """variant itself, or ConfigError listing the valid options."""
    if variant not in VARIANTS:
        raise ConfigError(f"tour variant must be one of {list(VARIANTS)}, got {variant!r}")
    return variant


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
    stop="top1", budget=None.
    """

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
    scale: float = 1.0
    standardize: bool = False
    explore: bool = False
    memory: str = "round"
    stop: str = "top1"
    budget: int | None = None

    def __post_init__(self) -> None:
        check_variant(self.variant)
        for name, allowed in (("memory", MEMORIES), ("stop", STOP_RULES)):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"tour.{name} must be one of {list(allowed)}, got {value!r}")
        for name in ("standardize", "explore"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"tour.{name} must be true or false, got "
                                  f"{getattr(self, name)!r}")
        if self.budget is not None and (not _is_int(self.budget) or self.budget < 1):
            raise ConfigError(f"tour.budget must be an integer >= 1, got {self.budget!r}")
        for name in ("k", "max_rounds"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ConfigError(f"tour.{name} must be an integer >= 1, got {value!r}")
        for name in ("lr", "tau", "scale"):
            value = getattr(self, name)
            if not _is_number(value) or not value > 0:
                raise ConfigError(f"tour.{name} must be a number > 0, got {value!r}")
        if not _is_number(self.p) or not 0 < self.p <= 1:
            raise ConfigError(f"tour.p must be in (0, 1], got {self.p!r}")
        if not _is_number(self.momentum) or not 0 <= self.momentum < 1:
            raise ConfigError(f"tour.momentum must be in [0, 1), got {self.momentum!r}")
        if not _is_number(self.weight_decay) or not self.weight_decay >= 0:
            raise ConfigError(f"tour.weight_decay must be >= 0, got {self.weight_decay!r}")
        if not _is_number(self.lam) or not 0 <= self.lam <= 1:
            raise ConfigError(f"tour.lam must be in [0, 1], got {self.lam!r}")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> TourConfig:
        """Build from user options; unknown keys are rejected with the supported ones."""
        return from_options(cls, options, prefix="tour ")

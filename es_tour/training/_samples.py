"""Fixed texts for the parity figures written into every manifest."""

from __future__ import annotations

PARITY_QUERIES: tuple[str, ...] = (
    "what causes antibiotic resistance",
    "vitamin D deficiency and bone fractures in older adults",
    "how do elasticsearch shards replicate",
    "BRCA1 mutation breast cancer risk",
    "Is coffee consumption associated with lower mortality?",
    "query expansion with pseudo relevance feedback",
    "x",
    "The p53 protein suppresses tumour growth.",
)

PARITY_DOCS: tuple[str, ...] = (
    (
        "Antibiotic resistance arises when bacteria acquire genes that neutralise the drug, "
        "often through horizontal gene transfer on plasmids."
    ),
    (
        "In a cohort of 12,000 adults aged over 65, low serum 25-hydroxyvitamin D was "
        "associated with a higher incidence of hip fracture (hazard ratio 1.4, 95% CI 1.1-1.8)."
    ),
    (
        "Each shard in Elasticsearch has one primary and zero or more replicas; replicas are "
        "promoted when the node holding the primary fails."
    ),
    (
        "Women carrying a pathogenic BRCA1 variant have a lifetime breast cancer risk of "
        "roughly 60 to 70 percent."
    ),
    "Coffee",
    (
        "Pseudo relevance feedback assumes the top-ranked documents are relevant and adds "
        "their most frequent terms to the query before searching again. "
    )
    * 12,
    (
        "Mitochondria generate ATP through oxidative phosphorylation; defects in complex I "
        "are the most common cause of inherited mitochondrial disease."
    ),
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
)

PARITY_TEXTS: tuple[str, ...] = PARITY_QUERIES + PARITY_DOCS

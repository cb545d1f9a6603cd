/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The query-refinement methods that {@code index.tour.method} may name.
 *
 * <p>Engine-neutral: this type imports nothing from OpenSearch or Elasticsearch, so the
 * one definition serves both builds. Each constant carries the lower-case, hyphenated
 * name that users write in index settings and that the Python side ({@code es_tour})
 * uses for its method registry.
 */
public enum TourMethod {
    /** Hard TOUR step: the labeler's top-1 verdict picks the next query. */
    TOUR_HARD("tour-hard"),
    /** Soft TOUR step: a temperature-weighted mixture over the nucleus of results. */
    TOUR_SOFT("tour-soft"),
    /** Classic Rocchio vector feedback. */
    ROCCHIO("rocchio"),
    /** The hybrid retrieval environment alone: BM25 and kNN labelled, no refinement. */
    HRE("hre"),
    /** An agent that rewrites the query with RM3-style expansion terms. */
    RM3_AGENT("rm3-agent"),
    /** An agent whose rewrite policy is a learned model. */
    LEARNED_AGENT("learned-agent"),
    /** The labeler over a pool that BM25 and kNN fill in turn, {@code k} pairs per query. */
    RERANK_HYBRID("rerank-hybrid"),
    /** BM25's top-k reranked by the stored retriever vectors; no labeler pairs. */
    VECTOR_RERANK("vector-rerank"),
    /** TOUR's vector step and the RM3 agent's rewrite in one BM25 and kNN session. */
    HYBRID_TOUR("hybrid-tour"),
    /** The hybrid retrieval environment with TOUR's step as the agent's action. */
    TOUR_AGENT("tour-agent"),
    /** The labeler over the top {@code k} of the first stage that {@code index.tour.first_stage} names. */
    RERANK("rerank"),
    /** BM25 and kNN fused by a convex combination of z-scored scores; no labeler pairs. */
    HYBRID_LINEAR("hybrid-linear"),
    /** Qdrant's Relevance Feedback Query: the kNN top docs labelled, then one kNN by its naive formula. */
    RELEVANCE_FEEDBACK("relevance-feedback");

    private final String settingValue;

    TourMethod(String settingValue) {
        this.settingValue = settingValue;
    }

    /** @return the name as written in index settings, e.g. {@code "tour-hard"} */
    public String settingValue() {
        return settingValue;
    }

    /** @return every valid setting value, in declaration order */
    public static List<String> settingValues() {
        return Arrays.stream(values()).map(TourMethod::settingValue).collect(Collectors.toUnmodifiableList());
    }

    /**
     * Looks a method up by its setting value. The match is exact: names are lower-case.
     *
     * @param value a setting value such as {@code "tour-soft"}
     * @return the matching method
     * @throws IllegalArgumentException naming the bad value and listing the valid options
     */
    public static TourMethod fromSettingValue(String value) {
        for (TourMethod method : values()) {
            if (method.settingValue.equals(value)) {
                return method;
            }
        }
        throw new IllegalArgumentException("unknown tour method [" + value + "], valid options are " + settingValues());
    }

    @Override
    public String toString() {
        return settingValue;
    }
}

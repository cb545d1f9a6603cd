/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.opensearch.common.settings.Setting;
import org.opensearch.common.settings.Setting.Property;

/**
 * Every {@code index.tour.*} setting, declared once.
 *
 * <p>Each setting states its default, its bounds, and its scope: all are index-scoped and
 * dynamic, so they can be set at index creation or changed later with
 * {@code PUT <index>/_settings}. Values are parsed and checked by the engine when they are
 * written; a bad value fails the request with the engine's own 400
 * ({@code illegal_argument_exception}) whose reason echoes the bad value and the bound or
 * the valid options.
 *
 * <p>This class declares settings only. {@link TourPlugin} registers them; what the values
 * mean is implemented by the {@code es_tour} Python package, which reads them back with
 * {@code GET <index>/_settings}.
 *
 * <p>The Elasticsearch build compiles this same file with {@code org.opensearch.} rewritten
 * to {@code org.elasticsearch.} (see {@code pom.xml}, profile {@code elasticsearch}), so only
 * the {@code Setting} API common to both engines may be used here.
 */
public final class TourSettings {

    /** Common prefix of every setting declared here. */
    public static final String PREFIX = "index.tour.";

    /** Lower bound of {@link #K}, inclusive. */
    public static final int K_MIN = 1;
    /** Upper bound of {@link #K}, inclusive. */
    public static final int K_MAX = 1000;
    /** Lower bound of {@link #MAX_ROUNDS}, inclusive. */
    public static final int MAX_ROUNDS_MIN = 1;
    /** Upper bound of {@link #MAX_ROUNDS}, inclusive. */
    public static final int MAX_ROUNDS_MAX = 10;
    /** Lower bound of {@link #LR}, inclusive. */
    public static final double LR_MIN = 1e-6;
    /** Upper bound of {@link #LR}, inclusive. */
    public static final double LR_MAX = 10.0;
    /** Lower bound of {@link #TEMPERATURE}, inclusive. */
    public static final double TEMPERATURE_MIN = 0.001;
    /** Upper bound of {@link #TEMPERATURE}, inclusive. */
    public static final double TEMPERATURE_MAX = 100.0;
    /** Lower bound of {@link #THRESHOLD}, inclusive. */
    public static final double THRESHOLD_MIN = 1e-6;
    /** Upper bound of {@link #BM25_WEIGHT} and {@link #DENSE_WEIGHT}, inclusive. */
    public static final double FUSION_WEIGHT_MAX = 10.0;
    /** The first stages that {@link #FIRST_STAGE} may name. */
    public static final List<String> FIRST_STAGES = List.of("knn", "bm25", "hybrid-linear");
    /** The pools that {@link #POOL} may name. */
    public static final List<String> POOLS = List.of("interleave", "hybrid-linear");
    /** The Lucene query's refinements that {@link #LEXICAL} may name. */
    public static final List<String> LEXICAL_POLICIES = List.of("rm3", "none");
    /** Lower bound of {@link #BUDGET}, inclusive. */
    public static final int BUDGET_MIN = 1;
    /** Upper bound of {@link #BUDGET}, inclusive. */
    public static final int BUDGET_MAX = 1000;
    /** Lower bound of {@link #WINDOW}, inclusive. */
    public static final int WINDOW_MIN = 1;
    /** Upper bound of {@link #WINDOW}, inclusive: the sidecar's default cap on a window. */
    public static final int WINDOW_MAX = 1000;
    /** Lower bound of {@link #VECTOR_STORE_SHARDS}, inclusive. */
    public static final int VECTOR_STORE_SHARDS_MIN = 1;
    /** Upper bound of {@link #VECTOR_STORE_SHARDS}, inclusive: the engines' own cap on an index's shards. */
    public static final int VECTOR_STORE_SHARDS_MAX = 1024;
    /**
     * What a model setting ({@link #LABELER}, {@link #ENCODER}) must match: a registry name, or the
     * path of a model directory on the sidecar's host (letters, digits, {@code . _ ~ / + -}).
     */
    public static final Pattern MODEL_PATTERN = Pattern.compile("[A-Za-z0-9._~/+-]+");
    /**
     * One member of an ensemble {@link #LABELER}: a model name or path, with an optional positive weight
     * after {@code ^}, as a boosted query term reads.
     */
    public static final Pattern LABELER_MEMBER = Pattern.compile("([A-Za-z0-9._~/-]+)(\\^([0-9]+(\\.[0-9]+)?))?");
    /** Members an ensemble {@link #LABELER} may join with {@code +}, at most. */
    public static final int ENSEMBLE_MAX = 4;

    /** Whether es-tour refinement is switched on for the index. Boolean; default {@code false}. */
    public static final Setting<Boolean> ENABLED = Setting.boolSetting(
        PREFIX + "enabled", false, Property.IndexScope, Property.Dynamic);

    /**
     * The refinement method: one of {@code tour-hard}, {@code tour-soft}, {@code rocchio},
     * {@code hre}, {@code rm3-agent}, {@code learned-agent}, {@code rerank-hybrid},
     * {@code vector-rerank}, {@code hybrid-tour}, {@code tour-agent}, {@code rerank},
     * {@code hybrid-linear}, {@code relevance-feedback} (see {@link TourMethod}).
     * Default {@code tour-hard}. An unknown name is rejected with the list of valid options.
     */
    public static final Setting<TourMethod> METHOD = new Setting<>(
        PREFIX + "method", TourMethod.TOUR_HARD.settingValue(), TourSettings::parseMethod,
        Property.IndexScope, Property.Dynamic);

    /** Hits retrieved and judged per round. Integer in [1, 1000]; default 10. */
    public static final Setting<Integer> K = Setting.intSetting(
        PREFIX + "k", 10, K_MIN, K_MAX, Property.IndexScope, Property.Dynamic);

    /** Refinement rounds after the first retrieval. Integer in [1, 10]; default 3. */
    public static final Setting<Integer> MAX_ROUNDS = Setting.intSetting(
        PREFIX + "max_rounds", 3, MAX_ROUNDS_MIN, MAX_ROUNDS_MAX, Property.IndexScope, Property.Dynamic);

    /** Step size of the query-vector update. Double in [1e-6, 10]; default 0.2. */
    public static final Setting<Double> LR = boundedDouble("lr", 0.2, LR_MIN, true, LR_MAX);

    /**
     * Weight of the labeler in the final ranking, λ·minmax(φ) + (1−λ)·minmax(q·c) over the
     * docs seen. Double in [0, 1]; default 1.0 (the labeler alone).
     */
    public static final Setting<Double> LAMBDA = boundedDouble("lambda", 1.0, 0.0, true, 1.0);

    /** Softmax temperature over labeler scores. Double in [0.001, 100]; default 0.5. */
    public static final Setting<Double> TEMPERATURE = boundedDouble("temperature", 0.5, TEMPERATURE_MIN, true, TEMPERATURE_MAX);

    /**
     * Nucleus mass p of tour-hard (the smallest top set whose probability reaches p is kept),
     * or the learned agent's acting threshold. Double in [1e-6, 1]; default 0.5.
     */
    public static final Setting<Double> THRESHOLD = boundedDouble("threshold", 0.5, THRESHOLD_MIN, true, 1.0);

    /**
     * What {@code rerank} labels the top {@code k} of: one of {@link #FIRST_STAGES}.
     * Default {@code knn}.
     */
    public static final Setting<String> FIRST_STAGE = choice("first_stage", "knn", FIRST_STAGES);

    /**
     * How {@code hybrid-tour} picks each round's docs to label from BM25 ∪ kNN: the two
     * rankings in turn ({@code interleave}) or their union ranked as {@code hybrid-linear}
     * ranks it. One of {@link #POOLS}; default {@code interleave}.
     */
    public static final Setting<String> POOL = choice("pool", "interleave", POOLS);

    /**
     * The Lucene query's refinement in {@code hybrid-tour}: the RM3 agent's Δq, or
     * {@code none} (the query's own text throughout). One of {@link #LEXICAL_POLICIES};
     * default {@code rm3}.
     */
    public static final Setting<String> LEXICAL = choice("lexical", "rm3", LEXICAL_POLICIES);

    /**
     * Labeler pairs per query of every method with a budget: TOUR, Rocchio, relevance feedback,
     * the agents and {@code hybrid-tour} (the rerankers' budget is their {@code k}). Integer in [1, 1000];
     * default 20. The sidecar reads only a set value; unset, each method keeps its own.
     */
    public static final Setting<Integer> BUDGET = Setting.intSetting(
        PREFIX + "budget", 20, BUDGET_MIN, BUDGET_MAX, Property.IndexScope, Property.Dynamic);

    /**
     * How many of a search's first hits es-tour orders, as Elasticsearch's {@code rank_window_size}
     * or OpenSearch's {@code pagination_depth}: pages past them go on in the engine's own order
     * for the request's query. Integer in [1, 1000]; default 100.
     */
    public static final Setting<Integer> WINDOW = Setting.intSetting(
        PREFIX + "window", 100, WINDOW_MIN, WINDOW_MAX, Property.IndexScope, Property.Dynamic);

    /**
     * Weight of z(BM25) beside z(q·c) in {@code hybrid-linear}, alone, as {@code rerank}'s
     * first stage or as {@code hybrid-tour}'s pool. Double in [0, 1]; default 0.4 (chosen on
     * SciFact train).
     */
    public static final Setting<Double> LEXICAL_WEIGHT = boundedDouble("lexical_weight", 0.4, 0.0, true, 1.0);

    /**
     * Final-score fusion of a labelling method: the weight of z(BM25) beside z(φ) over the
     * docs it labelled. Double in [0, 10]; default 0 (φ alone).
     */
    public static final Setting<Double> BM25_WEIGHT = boundedDouble("bm25_weight", 0.0, 0.0, true, FUSION_WEIGHT_MAX);

    /** Final-score fusion: the weight of z(q·c) beside z(φ). Double in [0, 10]; default 0. */
    public static final Setting<Double> DENSE_WEIGHT = boundedDouble("dense_weight", 0.0, 0.0, true, FUSION_WEIGHT_MAX);

    /** Name of the dense-vector field used for kNN rounds. Non-blank string; default {@code embedding}. */
    public static final Setting<String> VECTOR_FIELD = Setting.simpleString(
        PREFIX + "vector_field", "embedding", TourSettings::requireVectorField, Property.IndexScope, Property.Dynamic);

    /** Text fields searched by BM25 rounds. Non-empty list of non-blank names; default {@code [title, text]}. */
    public static final Setting<List<String>> TEXT_FIELDS = Setting.listSetting(
        PREFIX + "text_fields", List.of("title", "text"), Function.identity(), TourSettings::requireFieldList,
        Property.IndexScope, Property.Dynamic);

    /**
     * The labeler: a registry model name or a model directory ({@code es-tour export},
     * {@code train-reranker}), dual or cross; or an ensemble of up to {@link #ENSEMBLE_MAX} of them joined
     * by {@code +}, each {@link #LABELER_MEMBER} with an optional {@code ^weight}
     * ({@code bge-small-en-v1.5^1+e5-small-v2^0.5}). Default {@code default}.
     */
    public static final Setting<String> LABELER = Setting.simpleString(
        PREFIX + "labeler", "default", TourSettings::requireLabeler, Property.IndexScope, Property.Dynamic);

    /**
     * The query encoder: a registry model name or a dual model directory ({@code es-tour export}); its
     * dimension must be the vector field's. Must match {@link #MODEL_PATTERN}; default {@code retriever}.
     */
    public static final Setting<String> ENCODER = model("encoder", "retriever");

    /**
     * Primary shards of the labeler vector store ({@code es-tour-vectors-*}) that this index's docs
     * are the first to fill. Integer in [1, 1024]; default 1. The sidecar reads only a set value;
     * unset, the store takes this index's {@code index.number_of_shards}.
     */
    public static final Setting<Integer> VECTOR_STORE_SHARDS = Setting.intSetting(
        PREFIX + "vector_store_shards", 1, VECTOR_STORE_SHARDS_MIN, VECTOR_STORE_SHARDS_MAX,
        Property.IndexScope, Property.Dynamic);

    private static final List<Setting<?>> ALL = List.of(
        ENABLED, METHOD, K, MAX_ROUNDS, LR, LAMBDA, TEMPERATURE, THRESHOLD, FIRST_STAGE, POOL, LEXICAL,
        BUDGET, WINDOW, LEXICAL_WEIGHT, BM25_WEIGHT, DENSE_WEIGHT, VECTOR_FIELD, TEXT_FIELDS, LABELER,
        ENCODER, VECTOR_STORE_SHARDS);

    private TourSettings() {}

    /** @return every {@code index.tour.*} setting, in declaration order; the list is immutable */
    public static List<Setting<?>> all() {
        return ALL;
    }

    private static TourMethod parseMethod(String value) {
        try {
            return TourMethod.fromSettingValue(value);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(
                "Failed to parse value [" + value + "] for setting [" + PREFIX + "method]: " + e.getMessage(), e);
        }
    }

    /** A double setting whose parser rejects NaN and out-of-range values, echoing the bad value. */
    private static Setting<Double> boundedDouble(String name, double defaultValue, double min, boolean minInclusive, double max) {
        String key = PREFIX + name;
        Function<String, Double> parser = raw -> {
            double value = Double.parseDouble(raw);
            boolean aboveMin = minInclusive ? value >= min : value > min;
            if (!aboveMin) {
                throw new IllegalArgumentException(
                    "Failed to parse value [" + raw + "] for setting [" + key + "] must be " + (minInclusive ? ">= " : "> ") + min);
            }
            if (!(value <= max)) {
                throw new IllegalArgumentException("Failed to parse value [" + raw + "] for setting [" + key + "] must be <= " + max);
            }
            return value;
        };
        return new Setting<>(key, Double.toString(defaultValue), parser, Property.IndexScope, Property.Dynamic);
    }

    /** A string setting that must be one of {@code options}. */
    private static Setting<String> choice(String name, String defaultValue, List<String> options) {
        return Setting.simpleString(
            PREFIX + name, defaultValue, value -> requireChoice(name, value, options), Property.IndexScope, Property.Dynamic);
    }

    private static void requireChoice(String name, String value, List<String> options) {
        if (!options.contains(value)) {
            throw new IllegalArgumentException(
                "Failed to parse value [" + value + "] for setting [" + PREFIX + name + "]: valid options are " + options);
        }
    }

    private static void requireVectorField(String value) {
        if (value == null || value.isBlank()) {
            throw new IllegalArgumentException("setting [" + PREFIX + "vector_field] must not be empty, got [" + value + "]");
        }
    }

    private static void requireFieldList(List<String> fields) {
        if (fields.isEmpty()) {
            throw new IllegalArgumentException("setting [" + PREFIX + "text_fields] must name at least one field");
        }
        for (String field : fields) {
            if (field == null || field.isBlank()) {
                throw new IllegalArgumentException(
                    "setting [" + PREFIX + "text_fields] must not contain an empty field name, got " + fields);
            }
        }
    }

    /** A model setting: a registry name or a model directory's path. */
    private static Setting<String> model(String name, String defaultValue) {
        return Setting.simpleString(
            PREFIX + name, defaultValue, value -> requireModel(name, value), Property.IndexScope, Property.Dynamic);
    }

    private static void requireLabeler(String value) {
        String key = PREFIX + "labeler";
        String[] members = value == null ? new String[0] : value.split("\\+", -1);
        if (members.length == 0 || members.length > ENSEMBLE_MAX) {
            throw new IllegalArgumentException("Invalid value [" + value + "] for setting [" + key
                + "]: a model, or 1 to " + ENSEMBLE_MAX + " models joined by +");
        }
        Set<String> models = new HashSet<>();
        for (String member : members) {
            Matcher matcher = LABELER_MEMBER.matcher(member);
            if (!matcher.matches()) {
                throw new IllegalArgumentException("Invalid value [" + value + "] for setting [" + key
                    + "]: member [" + member + "] must match " + LABELER_MEMBER.pattern());
            }
            if (matcher.group(3) != null && !(Double.parseDouble(matcher.group(3)) > 0)) {
                throw new IllegalArgumentException("Invalid value [" + value + "] for setting [" + key
                    + "]: the weight of [" + matcher.group(1) + "] must be > 0");
            }
            if (!models.add(matcher.group(1))) {
                throw new IllegalArgumentException("Invalid value [" + value + "] for setting [" + key
                    + "]: [" + matcher.group(1) + "] is named twice");
            }
        }
    }

    private static void requireModel(String name, String value) {
        if (value == null || !MODEL_PATTERN.matcher(value).matches()) {
            throw new IllegalArgumentException(
                "Invalid value [" + value + "] for setting [" + PREFIX + name + "]: must match " + MODEL_PATTERN.pattern());
        }
    }
}

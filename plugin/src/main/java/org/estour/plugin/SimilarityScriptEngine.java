/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.lucene.index.FieldInfo;
import org.apache.lucene.index.FloatVectorValues;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.VectorSimilarityFunction;
import org.apache.lucene.search.DocIdSetIterator;
import org.apache.lucene.search.VectorScorer;
import org.opensearch.script.FieldScript;
import org.opensearch.script.ScriptContext;
import org.opensearch.script.ScriptEngine;

/**
 * The {@value #LANG} script language: two field scripts on a vector field ({@code params.f}).
 *
 * <ul>
 * <li>{@value #SIMILARITY} gives each hit q·c, the similarity of a query vector
 * ({@code params.q}) to the hit's vector, as the field's kNN compares them, unscaled: the
 * cosine for a cosine field, the dot product for a dot-product one. A hybrid search's BM25
 * leg asks it of its hits, so that both of its scores come in one round trip. Painless can
 * give it on OpenSearch only (Elasticsearch's vector functions serve score scripts alone);
 * this script converts the query vector once per search.</li>
 * <li>{@value #VECTOR} gives each hit its vector, as base64 of its little-endian float32s:
 * what a TOUR step reads of the docs it labels. The engine writes one string, where the same
 * vector in {@code _source} or from painless is hundreds of floats written out as JSON, the
 * most costly part of such a fetch.</li>
 * </ul>
 *
 * <p>Both read the segment's Lucene vectors (an OpenSearch {@code knn_vector} of the Lucene
 * engine, an Elasticsearch indexed {@code dense_vector}). A hit without such a vector gets
 * none (null).
 */
public final class SimilarityScriptEngine implements ScriptEngine {

    /** The script language's name ({@code "lang"} of a script). */
    public static final String LANG = "tour";

    /** The q·c script's source. */
    public static final String SIMILARITY = "similarity";

    /** The stored vector script's source. */
    public static final String VECTOR = "vector";

    @Override
    public String getType() {
        return LANG;
    }

    @Override
    public <T> T compile(String name, String code, ScriptContext<T> context, Map<String, String> options) {
        if (!context.equals(FieldScript.CONTEXT)) {
            throw new IllegalArgumentException("[" + LANG + "] scripts are field scripts (script_fields), not [" + context.name + "]");
        }
        if (VECTOR.equals(code)) {
            FieldScript.Factory vectors = (params, lookup) -> {
                String field = field(params);
                return leaf -> new StoredVector(params, leaf.reader(), field);
            };
            return context.factoryClazz.cast(vectors);
        }
        if (!SIMILARITY.equals(code)) {
            throw new IllegalArgumentException("unknown [" + LANG + "] script [" + code + "]: the scripts are ["
                + SIMILARITY + "] and [" + VECTOR + "]");
        }
        FieldScript.Factory factory = (params, lookup) -> {
            String field = field(params);
            float[] query = query(params);
            return leaf -> new Similarity(params, leaf.reader(), field, query);
        };
        return context.factoryClazz.cast(factory);
    }

    @Override
    public Set<ScriptContext<?>> getSupportedContexts() {
        return Set.of(FieldScript.CONTEXT);
    }

    static String field(Map<String, Object> params) {
        if (params.get("f") instanceof String field) {
            return field;
        }
        throw new IllegalArgumentException("[" + LANG + "] scripts need params.f, the vector field's name");
    }

    static float[] query(Map<String, Object> params) {
        if (params.get("q") instanceof List<?> values && !values.isEmpty()) {
            float[] query = new float[values.size()];
            for (int i = 0; i < query.length; i++) {
                if (!(values.get(i) instanceof Number number)) {
                    throw new IllegalArgumentException("[" + LANG + "] script [" + SIMILARITY + "]: params.q holds a non-number");
                }
                query[i] = number.floatValue();
            }
            return query;
        }
        throw new IllegalArgumentException("[" + LANG + "] script [" + SIMILARITY + "] needs params.q, the query vector");
    }

    /**
     * q·c unscaled from a Lucene vector score, which maps it into [0, ∞): the inverse of each
     * {@link VectorSimilarityFunction}'s map; the score itself for Euclidean distance, which
     * has no q·c.
     */
    static double unscaled(VectorSimilarityFunction function, float score) {
        return switch (function) {
            case COSINE, DOT_PRODUCT -> 2.0 * score - 1.0;
            case MAXIMUM_INNER_PRODUCT -> score < 1 ? 1.0 - 1.0 / score : score - 1.0;
            default -> score;
        };
    }

    /** A field script of one segment, asked for each hit in turn: its params and the hit's doc. */
    abstract static class PerHit extends FieldScript {
        private final Map<String, Object> params;
        protected int doc = -1;

        PerHit(Map<String, Object> params) {
            this.params = params;
        }

        @Override
        public Map<String, Object> getParams() {
            return params;
        }

        @Override
        public void setDocument(int doc) {
            this.doc = doc;
        }
    }

    /** One segment's script: the fetch phase asks it of that segment's hits in doc order. */
    static final class Similarity extends PerHit {
        private final LeafReader reader;
        private final String field;
        private final float[] query;
        private final VectorSimilarityFunction function;
        private VectorScorer scorer;

        Similarity(Map<String, Object> params, LeafReader reader, String field, float[] query) throws IOException {
            super(params);
            this.reader = reader;
            this.field = field;
            this.query = query;
            FieldInfo info = reader.getFieldInfos().fieldInfo(field);
            this.function = info == null ? null : info.getVectorSimilarityFunction();
            this.scorer = scorer();
        }

        private VectorScorer scorer() throws IOException {
            if (function == null) {
                return null;
            }
            FloatVectorValues values = reader.getFloatVectorValues(field);
            if (values == null) {
                return null;
            }
            if (values.dimension() != query.length) {
                throw new IllegalArgumentException("[" + LANG + "] script [" + SIMILARITY + "]: params.q has " + query.length
                    + " dimensions and [" + field + "] " + values.dimension());
            }
            return values.scorer(query);
        }

        @Override
        public Object execute() {
            try {
                if (scorer == null) {
                    return null;
                }
                DocIdSetIterator vectors = scorer.iterator();
                if (vectors.docID() > doc) { // asked out of doc order: read the segment again
                    scorer = scorer();
                    vectors = scorer.iterator();
                }
                int at = vectors.docID() < doc ? vectors.advance(doc) : vectors.docID();
                return at == doc ? unscaled(function, scorer.score()) : null;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /**
     * One segment's stored vectors, base64 of each hit's little-endian float32s, asked in doc
     * order. Lucene 10 reads a vector by its ordinal, where Lucene 9 reads it at the values'
     * own position; one source builds against both, so those calls are looked up once.
     */
    static final class StoredVector extends PerHit {
        private static final Method ITERATOR = method(FloatVectorValues.class, "iterator");
        private static final Method BY_ORDINAL = method(FloatVectorValues.class, "vectorValue", int.class);
        private static final Method AT_POSITION = method(FloatVectorValues.class, "vectorValue");
        private static final Method ORDINAL = ITERATOR == null ? null : method(ITERATOR.getReturnType(), "index");

        private final LeafReader reader;
        private final String field;
        private FloatVectorValues values;
        private DocIdSetIterator docs;

        StoredVector(Map<String, Object> params, LeafReader reader, String field) throws IOException {
            super(params);
            this.reader = reader;
            this.field = field;
            readFromStart();
        }

        private static Method method(Class<?> type, String name, Class<?>... parameters) {
            try {
                return type.getMethod(name, parameters);
            } catch (NoSuchMethodException otherLucene) {
                return null;
            }
        }

        /** {@code method}'s answer on {@code target}; a Lucene call's IOException as itself. */
        private static Object invoke(Method method, Object target, Object... arguments) throws IOException {
            try {
                return method.invoke(target, arguments);
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof IOException io) {
                    throw io;
                }
                throw new IllegalStateException(e.getCause());
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }

        private void readFromStart() throws IOException {
            // a field the reader's field infos lack (one field-level security hides) gives none
            values = reader.getFieldInfos().fieldInfo(field) == null ? null : reader.getFloatVectorValues(field);
            docs = values == null ? null
                : ITERATOR != null ? (DocIdSetIterator) invoke(ITERATOR, values) : (DocIdSetIterator) (Object) values;
        }

        @Override
        public Object execute() {
            try {
                if (docs == null) { // a segment without vectors in the field
                    return null;
                }
                if (docs.docID() > doc) { // asked out of doc order: read the segment again
                    readFromStart();
                }
                int at = docs.docID() < doc ? docs.advance(doc) : docs.docID();
                if (at != doc) {
                    return null;
                }
                float[] vector = (float[]) (ORDINAL != null ? invoke(BY_ORDINAL, values, invoke(ORDINAL, docs)) : invoke(AT_POSITION, values));
                ByteBuffer bytes = ByteBuffer.allocate(Float.BYTES * vector.length).order(ByteOrder.LITTLE_ENDIAN);
                bytes.asFloatBuffer().put(vector);
                return Base64.getEncoder().encodeToString(bytes.array());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}

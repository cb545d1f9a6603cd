/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;

import org.apache.lucene.document.Document;
import org.apache.lucene.document.KnnFloatVectorField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.Field;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.FieldInfo;
import org.apache.lucene.index.FieldInfos;
import org.apache.lucene.index.FilterLeafReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.VectorSimilarityFunction;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;
import org.junit.BeforeClass;
import org.junit.Test;
import org.opensearch.script.FieldScript;
import org.opensearch.script.ScoreScript;

/** The {@code tour} script language's scripts: each hit's q·c, and its vector, from Lucene vectors. */
public class SimilarityScriptEngineTest {

    private static final double EPSILON = 1e-6;

    /**
     * Elasticsearch 9's vector formats, which Lucene loads with every codec, log through its
     * own logging, which a test JVM outside Elasticsearch must first set up.
     */
    @BeforeClass
    public static void elasticsearchLogging() throws ReflectiveOperationException {
        try {
            Class.forName("org.elasticsearch.common.logging.LogConfigurator").getMethod("configureESLogging").invoke(null);
        } catch (ClassNotFoundException onOpenSearch) {
            // OpenSearch's formats log through log4j alone
        }
    }

    @Test
    public void test_cosine_field_gives_each_hit_its_cosine_and_a_doc_without_a_vector_none() throws IOException {
        List<Object> values = similarities(VectorSimilarityFunction.COSINE,
            new float[][] {{3, 0}, null, {0.6f, 0.8f}}, List.of(0.6, 0.8), 0, 1, 2);
        assertEquals(0.6, (double) values.get(0), EPSILON);
        assertNull(values.get(1));
        assertEquals(1.0, (double) values.get(2), EPSILON);
    }

    @Test
    public void test_inner_product_fields_give_the_raw_dot_product_negative_ones_too() throws IOException {
        List<Object> dot = similarities(VectorSimilarityFunction.DOT_PRODUCT,
            new float[][] {{1, 0}, {0, -1}}, List.of(0.6, 0.8), 0, 1);
        assertEquals(0.6, (double) dot.get(0), EPSILON);
        assertEquals(-0.8, (double) dot.get(1), EPSILON);
        List<Object> maximum = similarities(VectorSimilarityFunction.MAXIMUM_INNER_PRODUCT,
            new float[][] {{2, 0}, {3, 1}}, List.of(-1, 0.5), 0, 1);
        assertEquals(-2.0, (double) maximum.get(0), 1e-5);
        assertEquals(-2.5, (double) maximum.get(1), 1e-5);
    }

    @Test
    public void test_hits_asked_out_of_doc_order_each_get_their_own() throws IOException {
        List<Object> values = similarities(VectorSimilarityFunction.COSINE,
            new float[][] {{1, 0}, {0, 1}, {0.6f, 0.8f}}, List.of(0, 1), 2, 0, 1);
        assertEquals(0.8, (double) values.get(0), EPSILON);
        assertEquals(0.0, (double) values.get(1), EPSILON);
        assertEquals(1.0, (double) values.get(2), EPSILON);
    }

    @Test
    public void test_a_field_without_vectors_gives_none() throws IOException {
        List<Object> values = similarities(VectorSimilarityFunction.COSINE,
            new float[][] {{1, 0}}, List.of(1, 0), "title", 0);
        assertNull(values.get(0));
    }

    @Test
    public void test_vector_gives_each_hit_its_own_floats_in_any_order_and_a_doc_without_one_none() throws IOException {
        float[][] vectors = {{0.1f, -2.5f, 3e-7f}, null, {1f / 3, 0, -1}};
        List<Object> values = run(SimilarityScriptEngine.VECTOR, VectorSimilarityFunction.DOT_PRODUCT, vectors,
            Map.of("f", "v"), 2, 0, 1, 2);
        assertArrayEquals(vectors[2], floats((String) values.get(0)), 0f);
        assertArrayEquals(vectors[0], floats((String) values.get(1)), 0f);
        assertNull(values.get(2));
        assertArrayEquals(vectors[2], floats((String) values.get(3)), 0f);
        assertNull(run(SimilarityScriptEngine.VECTOR, VectorSimilarityFunction.COSINE, vectors, Map.of("f", "title"), 0).get(0));
    }

    /** The floats of the script's base64 answer, read as the sidecar reads them: little-endian float32s. */
    private static float[] floats(String base64) {
        ByteBuffer bytes = ByteBuffer.wrap(Base64.getDecoder().decode(base64)).order(ByteOrder.LITTLE_ENDIAN);
        float[] vector = new float[bytes.remaining() / Float.BYTES];
        bytes.asFloatBuffer().get(vector);
        return vector;
    }

    @Test
    public void test_vector_gives_none_of_a_field_the_readers_field_infos_hide() throws IOException {
        float[][] vectors = {{0.1f, -2.5f, 3e-7f}, {1f / 3, 0, -1}};
        Map<String, Object> params = Map.of("f", "v");
        assertArrayEquals(vectors[1], floats((String) run(SimilarityScriptEngine.VECTOR, VectorSimilarityFunction.DOT_PRODUCT,
            vectors, params, UnaryOperator.identity(), 1).get(0)), 0f);
        assertEquals(List.of(), nonNull(run(SimilarityScriptEngine.VECTOR, VectorSimilarityFunction.DOT_PRODUCT, vectors,
            params, leaf -> hiding(leaf, "v"), 0, 1)));
    }

    private static List<Object> nonNull(List<Object> values) {
        return values.stream().filter(value -> value != null).toList();
    }

    /** {@code leaf} as field-level security shows it: {@code field} left out of its field infos, its vectors still below. */
    private static LeafReader hiding(LeafReader leaf, String field) {
        return new FilterLeafReader(leaf) {
            @Override
            public FieldInfos getFieldInfos() {
                List<FieldInfo> shown = new ArrayList<>();
                for (FieldInfo info : in.getFieldInfos()) {
                    if (!info.name.equals(field)) {
                        shown.add(info);
                    }
                }
                return new FieldInfos(shown.toArray(new FieldInfo[0]));
            }

            @Override
            public CacheHelper getCoreCacheHelper() {
                return null;
            }

            @Override
            public CacheHelper getReaderCacheHelper() {
                return null;
            }
        };
    }

    @Test
    public void test_bad_scripts_and_params_are_refused_with_a_reason() {
        SimilarityScriptEngine engine = new SimilarityScriptEngine();
        assertThrows(IllegalArgumentException.class,
            () -> engine.compile("s", "dot", FieldScript.CONTEXT, Map.of()));
        assertThrows(IllegalArgumentException.class,
            () -> engine.compile("s", SimilarityScriptEngine.SIMILARITY, ScoreScript.CONTEXT, Map.of()));
        FieldScript.Factory factory = engine.compile("s", SimilarityScriptEngine.SIMILARITY, FieldScript.CONTEXT, Map.of());
        assertThrows(IllegalArgumentException.class, () -> factory.newFactory(Map.of("q", List.of(1.0)), null));
        assertThrows(IllegalArgumentException.class, () -> factory.newFactory(Map.of("f", "v", "q", List.of("a")), null));
        assertThrows(IllegalArgumentException.class, () -> factory.newFactory(Map.of("f", "v", "q", List.of()), null));
        FieldScript.Factory vectors = engine.compile("s", SimilarityScriptEngine.VECTOR, FieldScript.CONTEXT, Map.of());
        assertThrows(IllegalArgumentException.class, () -> vectors.newFactory(Map.of(), null));
    }

    @Test
    public void test_a_query_of_the_wrong_dimension_is_refused() throws IOException {
        assertThrows(IllegalArgumentException.class, () -> similarities(VectorSimilarityFunction.COSINE,
            new float[][] {{1, 0}}, List.of(1, 0, 0), 0));
    }

    private static List<Object> similarities(VectorSimilarityFunction function, float[][] vectors, List<? extends Number> query,
                                             int... docs) throws IOException {
        return similarities(function, vectors, query, "v", docs);
    }

    private static List<Object> similarities(VectorSimilarityFunction function, float[][] vectors, List<? extends Number> query,
                                             String field, int... docs) throws IOException {
        return run(SimilarityScriptEngine.SIMILARITY, function, vectors, Map.of("f", field, "q", query), docs);
    }

    /** Script {@code source}'s answer for each doc of {@code docs}, asked in that order, in a one-segment index of {@code vectors}. */
    private static List<Object> run(String source, VectorSimilarityFunction function, float[][] vectors, Map<String, Object> params,
                                    int... docs) throws IOException {
        return run(source, function, vectors, params, UnaryOperator.identity(), docs);
    }

    /** The same, over the one segment as {@code view} shows it. */
    private static List<Object> run(String source, VectorSimilarityFunction function, float[][] vectors, Map<String, Object> params,
                                    UnaryOperator<LeafReader> view, int... docs) throws IOException {
        try (Directory directory = new ByteBuffersDirectory()) {
            try (IndexWriter writer = new IndexWriter(directory, new IndexWriterConfig())) {
                for (float[] vector : vectors) {
                    Document doc = new Document();
                    doc.add(new StringField("title", "t", Field.Store.NO));
                    if (vector != null) {
                        doc.add(new KnnFloatVectorField("v", vector, function));
                    }
                    writer.addDocument(doc);
                }
                writer.forceMerge(1);
            }
            try (DirectoryReader reader = DirectoryReader.open(directory)) {
                FieldScript.Factory factory = new SimilarityScriptEngine().compile("s", source, FieldScript.CONTEXT, Map.of());
                FieldScript script = factory.newFactory(params, null)
                    .newInstance(view.apply(reader.leaves().get(0).reader()).getContext());
                List<Object> values = new ArrayList<>();
                for (int doc : docs) {
                    script.setDocument(doc);
                    values.add(script.execute());
                }
                return values;
            }
        }
    }
}

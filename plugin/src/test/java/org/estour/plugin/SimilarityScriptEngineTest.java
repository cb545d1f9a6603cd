/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.lucene.document.Document;
import org.apache.lucene.document.KnnFloatVectorField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.Field;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.VectorSimilarityFunction;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;
import org.junit.BeforeClass;
import org.junit.Test;
import org.opensearch.script.FieldScript;
import org.opensearch.script.ScoreScript;

/** The {@code tour} script language's one script: each hit's q·c, from Lucene vectors. */
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

    /** The script's answer for each doc of {@code docs}, asked in that order, in a one-segment index of {@code vectors}. */
    private static List<Object> similarities(VectorSimilarityFunction function, float[][] vectors, List<? extends Number> query,
                                             String field, int... docs) throws IOException {
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
                FieldScript.Factory factory = new SimilarityScriptEngine().compile(
                    "s", SimilarityScriptEngine.SIMILARITY, FieldScript.CONTEXT, Map.of());
                FieldScript script = factory.newFactory(Map.of("f", field, "q", query), null)
                    .newInstance(reader.leaves().get(0));
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

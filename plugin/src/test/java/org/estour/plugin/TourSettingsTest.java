/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.junit.Test;
import org.opensearch.common.settings.Setting;
import org.opensearch.common.settings.Settings;

/** Checks the {@code Setting} objects directly: defaults, bounds, scope and error messages. */
public class TourSettingsTest {

    private static <T> T read(Setting<T> setting, String raw) {
        return setting.get(Settings.builder().put(setting.getKey(), raw).build());
    }

    private static IllegalArgumentException rejected(Setting<?> setting, String raw) {
        return assertThrows(IllegalArgumentException.class, () -> read(setting, raw));
    }

    private static void assertRejectedEchoingValue(Setting<?> setting, String raw) {
        String message = rejected(setting, raw).getMessage();
        assertTrue(message, message.contains("[" + raw + "]"));
        assertTrue(message, message.contains(setting.getKey()));
    }

    @Test
    public void test_defaults_when_index_sets_nothing() {
        assertEquals(false, TourSettings.ENABLED.get(Settings.EMPTY));
        assertEquals(TourMethod.TOUR_HARD, TourSettings.METHOD.get(Settings.EMPTY));
        assertEquals(10, (int) TourSettings.K.get(Settings.EMPTY));
        assertEquals(3, (int) TourSettings.MAX_ROUNDS.get(Settings.EMPTY));
        assertEquals(0.2, TourSettings.LR.get(Settings.EMPTY), 0.0);
        assertEquals(1.0, TourSettings.LAMBDA.get(Settings.EMPTY), 0.0);
        assertEquals(0.5, TourSettings.TEMPERATURE.get(Settings.EMPTY), 0.0);
        assertEquals(0.5, TourSettings.THRESHOLD.get(Settings.EMPTY), 0.0);
        assertEquals("knn", TourSettings.FIRST_STAGE.get(Settings.EMPTY));
        assertEquals("interleave", TourSettings.POOL.get(Settings.EMPTY));
        assertEquals("rm3", TourSettings.LEXICAL.get(Settings.EMPTY));
        assertEquals(20, (int) TourSettings.BUDGET.get(Settings.EMPTY));
        assertEquals(0.4, TourSettings.LEXICAL_WEIGHT.get(Settings.EMPTY), 0.0);
        assertEquals(0.0, TourSettings.BM25_WEIGHT.get(Settings.EMPTY), 0.0);
        assertEquals(0.0, TourSettings.DENSE_WEIGHT.get(Settings.EMPTY), 0.0);
        assertEquals("embedding", TourSettings.VECTOR_FIELD.get(Settings.EMPTY));
        assertEquals(List.of("title", "text"), TourSettings.TEXT_FIELDS.get(Settings.EMPTY));
        assertEquals("default", TourSettings.LABELER.get(Settings.EMPTY));
        assertEquals("retriever", TourSettings.ENCODER.get(Settings.EMPTY));
        assertEquals(1, (int) TourSettings.VECTOR_STORE_SHARDS.get(Settings.EMPTY));
    }

    @Test
    public void test_all_when_listed_then_every_setting_is_index_scoped_dynamic_and_prefixed_once() {
        List<Setting<?>> all = TourSettings.all();
        assertEquals(21, all.size());
        Set<String> keys = new HashSet<>();
        for (Setting<?> setting : all) {
            assertTrue(setting.getKey(), setting.getKey().startsWith(TourSettings.PREFIX));
            assertTrue(setting.getKey(), setting.hasIndexScope());
            assertTrue(setting.getKey(), setting.isDynamic());
            assertTrue("duplicate " + setting.getKey(), keys.add(setting.getKey()));
        }
        assertThrows(UnsupportedOperationException.class, () -> all.add(TourSettings.K));
    }

    @Test
    public void test_enabled_when_not_a_boolean_then_rejected() {
        assertTrue(read(TourSettings.ENABLED, "true"));
        rejected(TourSettings.ENABLED, "yes");
    }

    @Test
    public void test_method_when_valid_name_then_parsed() {
        for (TourMethod method : TourMethod.values()) {
            assertEquals(method, read(TourSettings.METHOD, method.settingValue()));
        }
        assertEquals(TourMethod.TOUR_SOFT, read(TourSettings.METHOD, "tour-soft"));
    }

    @Test
    public void test_method_when_unknown_then_message_echoes_value_and_lists_every_option() {
        String message = rejected(TourSettings.METHOD, "bogus").getMessage();
        assertTrue(message, message.contains("[bogus]"));
        assertTrue(message, message.contains("[index.tour.method]"));
        assertTrue(message, message.contains("[tour-hard, tour-soft, rocchio, hre, rm3-agent, learned-agent, rerank-hybrid, vector-rerank, hybrid-tour, tour-agent, rerank, hybrid-linear, relevance-feedback]"));
    }

    @Test
    public void test_method_when_wrong_case_then_rejected() {
        rejected(TourSettings.METHOD, "TOUR-HARD");
        rejected(TourSettings.METHOD, "tour_hard");
    }

    @Test
    public void test_k_and_budget_when_outside_1_to_1000_then_rejected() {
        for (Setting<Integer> setting : List.of(TourSettings.K, TourSettings.BUDGET)) {
            assertEquals(1, (int) read(setting, "1"));
            assertEquals(1000, (int) read(setting, "1000"));
            assertRejectedEchoingValue(setting, "0");
            assertRejectedEchoingValue(setting, "1001");
            rejected(setting, "2.5");
        }
    }

    @Test
    public void test_window_when_outside_1_to_1000_then_rejected() {
        assertEquals(100, (int) TourSettings.WINDOW.get(Settings.EMPTY));
        assertEquals(1000, (int) read(TourSettings.WINDOW, "1000"));
        assertRejectedEchoingValue(TourSettings.WINDOW, "0");
        assertRejectedEchoingValue(TourSettings.WINDOW, "1001");
    }

    @Test
    public void test_vector_store_shards_when_outside_1_to_1024_then_rejected() {
        assertEquals(1024, (int) read(TourSettings.VECTOR_STORE_SHARDS, "1024"));
        assertRejectedEchoingValue(TourSettings.VECTOR_STORE_SHARDS, "0");
        assertRejectedEchoingValue(TourSettings.VECTOR_STORE_SHARDS, "1025");
    }

    @Test
    public void test_max_rounds_when_outside_1_to_10_then_rejected() {
        assertEquals(1, (int) read(TourSettings.MAX_ROUNDS, "1"));
        assertEquals(10, (int) read(TourSettings.MAX_ROUNDS, "10"));
        assertRejectedEchoingValue(TourSettings.MAX_ROUNDS, "0");
        assertRejectedEchoingValue(TourSettings.MAX_ROUNDS, "11");
    }

    @Test
    public void test_lr_when_below_1e6_or_above_10_then_rejected() {
        assertEquals(10.0, read(TourSettings.LR, "10"), 0.0);
        assertEquals(1e-6, read(TourSettings.LR, "0.000001"), 0.0);
        assertRejectedEchoingValue(TourSettings.LR, "0.0000001");
        assertRejectedEchoingValue(TourSettings.LR, "0");
        assertRejectedEchoingValue(TourSettings.LR, "-0.1");
        assertRejectedEchoingValue(TourSettings.LR, "10.5");
        assertRejectedEchoingValue(TourSettings.LR, "NaN");
        assertRejectedEchoingValue(TourSettings.LR, "abc");
    }

    @Test
    public void test_lambda_when_outside_0_to_1_then_rejected() {
        assertEquals(0.0, read(TourSettings.LAMBDA, "0"), 0.0);
        assertEquals(1.0, read(TourSettings.LAMBDA, "1"), 0.0);
        assertRejectedEchoingValue(TourSettings.LAMBDA, "-0.01");
        assertRejectedEchoingValue(TourSettings.LAMBDA, "1.01");
        assertRejectedEchoingValue(TourSettings.LAMBDA, "NaN");
    }

    @Test
    public void test_temperature_when_below_0_001_or_above_100_then_rejected() {
        assertEquals(100.0, read(TourSettings.TEMPERATURE, "100"), 0.0);
        assertEquals(0.001, read(TourSettings.TEMPERATURE, "0.001"), 0.0);
        assertRejectedEchoingValue(TourSettings.TEMPERATURE, "0.0001");
        assertRejectedEchoingValue(TourSettings.TEMPERATURE, "0");
        assertRejectedEchoingValue(TourSettings.TEMPERATURE, "100.1");
        assertRejectedEchoingValue(TourSettings.TEMPERATURE, "Infinity");
    }

    @Test
    public void test_threshold_when_outside_1e6_to_1_then_rejected() {
        assertEquals(1e-6, read(TourSettings.THRESHOLD, "0.000001"), 0.0);
        assertRejectedEchoingValue(TourSettings.THRESHOLD, "0");
        assertEquals(1.0, read(TourSettings.THRESHOLD, "1.0"), 0.0);
        assertRejectedEchoingValue(TourSettings.THRESHOLD, "-1");
        assertRejectedEchoingValue(TourSettings.THRESHOLD, "1.5");
    }

    /** Every option reads back; {@code bad} is rejected with a message echoing it, naming the setting and listing the options. */
    private static void assertChoices(Setting<String> setting, List<String> options, String bad, String listed) {
        for (String option : options) {
            assertEquals(option, read(setting, option));
        }
        String message = rejected(setting, bad).getMessage();
        assertTrue(message, message.contains("[" + bad + "]"));
        assertTrue(message, message.contains("[" + setting.getKey() + "]"));
        assertTrue(message, message.contains(listed));
    }

    @Test
    public void test_first_stage_when_not_a_first_stage_then_message_lists_every_option() {
        assertChoices(TourSettings.FIRST_STAGE, TourSettings.FIRST_STAGES, "rerank", "[knn, bm25, hybrid-linear]");
        rejected(TourSettings.FIRST_STAGE, "KNN");
    }

    @Test
    public void test_pool_and_lexical_when_not_an_option_then_message_lists_every_option() {
        assertChoices(TourSettings.POOL, TourSettings.POOLS, "rrf", "[interleave, hybrid-linear]");
        assertChoices(TourSettings.LEXICAL, TourSettings.LEXICAL_POLICIES, "oracle", "[rm3, none]");
    }

    @Test
    public void test_lexical_weight_when_outside_0_to_1_then_rejected() {
        assertEquals(0.0, read(TourSettings.LEXICAL_WEIGHT, "0"), 0.0);
        assertEquals(1.0, read(TourSettings.LEXICAL_WEIGHT, "1"), 0.0);
        assertRejectedEchoingValue(TourSettings.LEXICAL_WEIGHT, "-0.1");
        assertRejectedEchoingValue(TourSettings.LEXICAL_WEIGHT, "1.5");
        assertRejectedEchoingValue(TourSettings.LEXICAL_WEIGHT, "NaN");
    }

    @Test
    public void test_fusion_weights_when_outside_0_to_10_then_rejected() {
        for (Setting<Double> weight : List.of(TourSettings.BM25_WEIGHT, TourSettings.DENSE_WEIGHT)) {
            assertEquals(0.0, read(weight, "0"), 0.0);
            assertEquals(10.0, read(weight, "10"), 0.0);
            assertRejectedEchoingValue(weight, "-1");
            assertRejectedEchoingValue(weight, "10.5");
            assertRejectedEchoingValue(weight, "Infinity");
        }
    }

    @Test
    public void test_vector_field_when_blank_then_rejected() {
        assertEquals("vec", read(TourSettings.VECTOR_FIELD, "vec"));
        rejected(TourSettings.VECTOR_FIELD, "");
        rejected(TourSettings.VECTOR_FIELD, "   ");
    }

    @Test
    public void test_text_fields_when_list_given_then_read_in_order() {
        Settings settings = Settings.builder().putList(TourSettings.TEXT_FIELDS.getKey(), "body", "title.en").build();
        assertEquals(List.of("body", "title.en"), TourSettings.TEXT_FIELDS.get(settings));
    }

    @Test
    public void test_text_fields_when_empty_or_blank_entry_then_rejected() {
        Settings empty = Settings.builder().putList(TourSettings.TEXT_FIELDS.getKey()).build();
        assertThrows(IllegalArgumentException.class, () -> TourSettings.TEXT_FIELDS.get(empty));
        Settings blank = Settings.builder().putList(TourSettings.TEXT_FIELDS.getKey(), "title", " ").build();
        assertThrows(IllegalArgumentException.class, () -> TourSettings.TEXT_FIELDS.get(blank));
    }

    @Test
    public void test_model_settings_when_not_a_name_or_path_then_rejected() {
        for (Setting<String> model : List.of(TourSettings.LABELER, TourSettings.ENCODER)) {
            assertEquals("ms-marco-minilm-l6.v2_int8", read(model, "ms-marco-minilm-l6.v2_int8"));
            assertEquals("models/My-Reranker", read(model, "models/My-Reranker"));
            assertEquals("/srv/models/e5+ft~2", read(model, "/srv/models/e5+ft~2"));
            String message = rejected(model, "Bad Name").getMessage();
            assertTrue(message, message.contains("[Bad Name]"));
            assertTrue(message, message.contains(model.getKey()));
            rejected(model, "");
            rejected(model, "a\nb");
        }
        assertTrue(rejected(TourSettings.ENCODER, "Bad Name").getMessage().contains(TourSettings.MODEL_PATTERN.pattern()));
    }

    @Test
    public void test_labeler_when_an_ensemble_then_members_and_weights_are_checked() {
        String ensemble = "bge-small-en-v1.5^1+e5-small-v2^0.5+minilm-l6";
        assertEquals(ensemble, read(TourSettings.LABELER, ensemble));
        assertTrue(rejected(TourSettings.LABELER, "a^0+b").getMessage().contains("must be > 0"));
        assertTrue(rejected(TourSettings.LABELER, "a^x+b").getMessage().contains("member [a^x]"));
        assertTrue(rejected(TourSettings.LABELER, "a++b").getMessage().contains("member []"));
        assertTrue(rejected(TourSettings.LABELER, "a+b^2+a").getMessage().contains("[a] is named twice"));
        assertTrue(rejected(TourSettings.LABELER, "a+b+c+d+e").getMessage().contains("1 to 4 models"));
        rejected(TourSettings.ENCODER, "a^2");
    }
}

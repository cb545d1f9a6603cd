/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.List;

import org.junit.Test;

/** The method names are the contract with the Python side; pin them. */
public class TourMethodTest {

    @Test
    public void test_setting_values_are_the_documented_names_in_order() {
        assertEquals(List.of("tour-hard", "tour-soft", "rocchio", "hre", "rm3-agent", "learned-agent", "rerank-hybrid",
            "vector-rerank", "hybrid-tour", "tour-agent", "rerank", "hybrid-linear", "relevance-feedback"),
            TourMethod.settingValues());
    }

    @Test
    public void test_from_setting_value_when_round_tripped_then_same_constant() {
        for (TourMethod method : TourMethod.values()) {
            assertEquals(method, TourMethod.fromSettingValue(method.toString()));
        }
    }

    @Test
    public void test_from_setting_value_when_unknown_then_lists_valid_options() {
        String message = assertThrows(IllegalArgumentException.class, () -> TourMethod.fromSettingValue("bm25")).getMessage();
        assertTrue(message, message.contains("[bm25]"));
        assertTrue(message, message.contains(TourMethod.settingValues().toString()));
    }
}

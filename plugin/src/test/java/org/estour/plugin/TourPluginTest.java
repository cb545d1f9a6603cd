/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertSame;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.junit.Test;
import org.opensearch.index.analysis.PreBuiltAnalyzerProviderFactory;

/** The plugin registers the settings declared in {@link TourSettings} and one analyzer. */
public class TourPluginTest {

    @Test
    public void test_get_settings_registers_exactly_tour_settings_all() {
        assertSame(TourSettings.all(), new TourPlugin().getSettings());
    }

    @Test
    public void test_registers_one_prebuilt_analyzer_named_tour_english() {
        List<PreBuiltAnalyzerProviderFactory> analyzers = new TourPlugin().getPreBuiltAnalyzerProviderFactories();
        assertEquals(1, analyzers.size());
        assertEquals("tour_english", analyzers.get(0).getName());
    }

    @Test
    public void test_english_analyzer_strips_possessives_and_stop_words_and_porter_stems() throws IOException {
        try (Analyzer analyzer = TourPlugin.englishAnalyzer()) {
            assertEquals(List.of("cell", "studi", "were", "run", "mice"),
                tokens(analyzer, "The cell's STUDIES were running in the mice"));
        }
    }

    private static List<String> tokens(Analyzer analyzer, String text) throws IOException {
        List<String> tokens = new ArrayList<>();
        try (TokenStream stream = analyzer.tokenStream("text", text)) {
            CharTermAttribute term = stream.addAttribute(CharTermAttribute.class);
            stream.reset();
            while (stream.incrementToken()) {
                tokens.add(term.toString());
            }
            stream.end();
        }
        return tokens;
    }
}

/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import java.util.Collection;
import java.util.List;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.opensearch.common.settings.Setting;
import org.opensearch.common.settings.Settings;
import org.opensearch.index.analysis.PreBuiltAnalyzerProviderFactory;
import org.opensearch.indices.analysis.PreBuiltCacheFactory.CachingStrategy;
import org.opensearch.plugins.AnalysisPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.plugins.ScriptPlugin;
import org.opensearch.script.ScriptContext;
import org.opensearch.script.ScriptEngine;

/**
 * Registers the {@code index.tour.*} index settings, declared in {@link TourSettings}, the
 * {@value #ENGLISH_ANALYZER} analyzer, and the {@value SimilarityScriptEngine#LANG} script
 * language ({@link SimilarityScriptEngine}).
 *
 * <p>{@value #ENGLISH_ANALYZER} is Lucene's {@link EnglishAnalyzer}: the standard tokenizer,
 * English possessives removed, lower case, English stop words, the Porter stemmer. It is the
 * analysis of Anserini's BM25 baselines. Elasticsearch publishes no module with language
 * analyzers and OpenSearch's integ-test distribution ships none, while both ship
 * lucene-analysis-common, so one name gives both engines the same index mapping.
 */
public final class TourPlugin extends Plugin implements AnalysisPlugin, ScriptPlugin {

    /** The name an index mapping gives the English analyzer, on either engine. */
    public static final String ENGLISH_ANALYZER = "tour_english";

    /** Called by the engine's plugin loader. */
    public TourPlugin() {}

    @Override
    public List<Setting<?>> getSettings() {
        return TourSettings.all();
    }

    @Override
    public List<PreBuiltAnalyzerProviderFactory> getPreBuiltAnalyzerProviderFactories() {
        // stateless apart from Lucene's per-thread reuse, so one instance serves every index
        return List.of(new PreBuiltAnalyzerProviderFactory(ENGLISH_ANALYZER, CachingStrategy.ONE, TourPlugin::englishAnalyzer));
    }

    @Override
    public ScriptEngine getScriptEngine(Settings settings, Collection<ScriptContext<?>> contexts) {
        return new SimilarityScriptEngine();
    }

    /** @return a new {@value #ENGLISH_ANALYZER} analyzer */
    static Analyzer englishAnalyzer() {
        return new EnglishAnalyzer();
    }
}

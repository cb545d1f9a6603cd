/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import java.util.List;

import org.opensearch.common.settings.Setting;
import org.opensearch.plugins.Plugin;

/**
 * Registers the {@code index.tour.*} index settings with the engine and does nothing else.
 * The settings themselves are declared in {@link TourSettings}.
 */
public final class TourPlugin extends Plugin {

    /** Called by the engine's plugin loader. */
    public TourPlugin() {}

    @Override
    public List<Setting<?>> getSettings() {
        return TourSettings.all();
    }
}

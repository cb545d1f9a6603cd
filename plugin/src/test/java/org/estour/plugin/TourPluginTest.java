/*
 * es-tour engine plugin.
 */
package org.estour.plugin;

import static org.junit.Assert.assertSame;

import org.junit.Test;

/** The plugin class only registers the settings declared in {@link TourSettings}. */
public class TourPluginTest {

    @Test
    public void test_get_settings_registers_exactly_tour_settings_all() {
        assertSame(TourSettings.all(), new TourPlugin().getSettings());
    }
}

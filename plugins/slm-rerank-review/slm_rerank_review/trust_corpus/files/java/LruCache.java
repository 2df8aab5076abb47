package org.example.cache;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * A size-bounded least-recently-used cache. Not thread-safe: callers synchronise.
 */
public final class LruCache<K, V> {
    private final int maxEntries;
    private final LinkedHashMap<K, V> entries;
    private long hits;
    private long misses;

    public LruCache(int maxEntries) {
        if (maxEntries < 1) {
            throw new IllegalArgumentException("maxEntries must be at least 1: " + maxEntries);
        }
        this.maxEntries = maxEntries;
        this.entries = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
                return size() > LruCache.this.maxEntries;
            }
        };
    }

    public V get(K key) {
        Objects.requireNonNull(key, "key");
        V value = entries.get(key);
        if (value == null) {
            misses++;
        } else {
            hits++;
        }
        return value;
    }

    public void put(K key, V value) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(value, "value");
        entries.put(key, value);
    }

    public double hitRate() {
        long total = hits + misses;
        return total == 0 ? 0.0 : (double) hits / total;
    }
}

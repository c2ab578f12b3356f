package dev.sluice.spark.combine;

import dev.sluice.spark.metrics.SluiceMetrics;
import java.io.IOException;
import java.util.Objects;
import org.apache.spark.Aggregator;
import org.apache.spark.TaskContext;
import scala.Product2;

/**
 * The map-side combine of a shuffle the engine groups by key hash ({@link HashGroups}): a bounded
 * first level on the task thread, where Spark's sort shuffle builds a hash map of every key of the
 * map task.
 *
 * <p>The reduce side merges however many combiners a key arrives with, so the map side need not
 * combine completely; it only has to pay for itself. Records probe an open-addressing table of
 * {@link #SLOTS} slots ({@link #PROBES_MAX} probes): a hit merges the value into the key's
 * combiner ({@code mergeValue}), a free slot takes a new key ({@code createCombiner}), and when
 * every probed slot holds another key the key in the record's home slot is evicted (its combiner
 * is written out) and replaced. Hot keys thus stay in the table. After {@link #SAMPLE_RECORDS}
 * records, if fewer than a quarter merged into a resident combiner (many keys, each seen a few
 * times: the benchmark's 1M keys), the table is written out and switched off: every further record
 * goes out as {@code createCombiner(value)}. Nothing holds a map task's keys, so the heap keeps
 * only short-lived objects (a full map of 1M boxed keys per task is what costs Spark's reduceByKey
 * most of its garbage collection).
 *
 * <p>The table holds only combiners of a fixed small size: boxed numbers or null (reduceByKey and
 * foldByKey over numbers, countByKey, distinct). Any other combiner (a collection, a string that
 * grows) could grow without bound in a resident slot, so the task's remaining records go to
 * Spark's own {@code combineValuesByKey}, which accounts its memory and spills, and its output is
 * written after the table's. Keys are bounded by {@link #RESIDENT_BYTES_MAX}, counted as {@link
 * #ENTRY_BYTES} per entry plus two bytes per character of a String key: past it the table is
 * written out and emptied.
 */
public final class MapCombiner<K, V, C> {
  /** Where combined records go: (key, combiner). */
  public interface Sink {
    void write(Object key, Object combiner) throws IOException;
  }

  /** Slots of the table (a power of two). */
  static final int SLOTS = 1 << 15;
  /** Slots a record probes before it evicts its home slot's key. */
  static final int PROBES_MAX = 8;
  /** Records after which a table that merged under a quarter of them is switched off. */
  public static final int SAMPLE_RECORDS = 1 << 17;
  /** Bytes of resident keys after which the table is written out (16 MiB). */
  static final long RESIDENT_BYTES_MAX = 16L << 20;
  /** Bytes counted per resident entry besides a String key's characters. */
  static final int ENTRY_BYTES = 64;

  private static final int SHIFT = 32 - Integer.numberOfTrailingZeros(SLOTS);
  private static final Object EMPTY = new Object();

  private final Aggregator<K, V, C> agg;
  private final TaskContext context;
  private final Sink out;
  private final Object[] keys = new Object[SLOTS];
  private final Object[] combiners = new Object[SLOTS];
  private final int[] hashes = new int[SLOTS];
  private long residentBytes;
  private long records;
  private long merged;
  private boolean off;

  public MapCombiner(Aggregator<K, V, C> agg, TaskContext context, Sink out) {
    this.agg = agg;
    this.context = context;
    this.out = out;
    java.util.Arrays.fill(keys, EMPTY);
  }

  /** Whether a combiner has a fixed small size (a boxed number, or null). */
  static boolean holdable(Object c) {
    if (c == null) {
      return true;
    }
    Class<?> k = c.getClass();
    return k == Long.class
        || k == Integer.class
        || k == Double.class
        || k == Float.class
        || k == Short.class
        || k == Byte.class;
  }

  /** Combines the map task's records into {@code out}. */
  public void run(scala.collection.Iterator<Product2<K, V>> in) throws IOException {
    while (in.hasNext()) {
      Product2<K, V> r = in.next();
      if (off) {
        out.write(r._1(), agg.createCombiner().apply(r._2()));
        continue;
      }
      if (!offer(r._1(), r._2())) {
        // A combiner the table cannot hold: Spark combines the rest.
        flush();
        SluiceMetrics.MAP_COMBINES_BY_SPARK.incrementAndGet();
        scala.collection.Iterator<scala.Tuple2<K, C>> rest =
            agg.combineValuesByKey(new Prepended<>(r, in), context);
        while (rest.hasNext()) {
          scala.Tuple2<K, C> c = rest.next();
          out.write(c._1(), c._2());
        }
        return;
      }
      if (++records == SAMPLE_RECORDS && merged * 4 < records) {
        flush();
        off = true;
        SluiceMetrics.MAP_COMBINES_OFF.incrementAndGet();
      }
    }
    flush();
  }

  /**
   * Folds one record into the table; false (the table unchanged) if its combiner would not be
   * {@link #holdable}.
   */
  private boolean offer(K key, V value) throws IOException {
    int h = HashGroups.hash(key);
    int home = (h * 0x9E3779B9) >>> SHIFT;
    for (int p = 0; p < PROBES_MAX; p++) {
      int s = (home + p) & (SLOTS - 1);
      Object k = keys[s];
      if (k == EMPTY) {
        return insert(s, key, h, value);
      }
      if (hashes[s] == h && Objects.equals(k, key)) {
        C c = agg.mergeValue().apply(cast(combiners[s]), value);
        if (!holdable(c)) {
          return false;
        }
        combiners[s] = c;
        merged++;
        return true;
      }
    }
    C fresh = agg.createCombiner().apply(value);
    if (!holdable(fresh)) {
      return false;
    }
    out.write(keys[home], combiners[home]);
    residentBytes -= entryBytes(keys[home]);
    place(home, key, h, fresh);
    return true;
  }

  private boolean insert(int s, K key, int h, V value) throws IOException {
    C c = agg.createCombiner().apply(value);
    if (!holdable(c)) {
      return false;
    }
    place(s, key, h, c);
    return true;
  }

  private void place(int s, K key, int h, Object c) throws IOException {
    keys[s] = key;
    hashes[s] = h;
    combiners[s] = c;
    residentBytes += entryBytes(key);
    if (residentBytes > RESIDENT_BYTES_MAX) {
      flush();
    }
  }

  private static long entryBytes(Object key) {
    return ENTRY_BYTES + (key instanceof String ? 2L * ((String) key).length() : 0);
  }

  /** Writes out every resident combiner and empties the table. */
  private void flush() throws IOException {
    for (int s = 0; s < SLOTS; s++) {
      if (keys[s] != EMPTY) {
        out.write(keys[s], combiners[s]);
        keys[s] = EMPTY;
        combiners[s] = null;
      }
    }
    residentBytes = 0;
  }

  @SuppressWarnings("unchecked")
  private C cast(Object c) {
    return (C) c;
  }
}

package dev.sluice.spark.combine;

import java.util.ArrayList;
import java.util.NoSuchElementException;
import java.util.Objects;
import org.apache.spark.Aggregator;
import org.apache.spark.TaskContext;
import scala.Product2;
import scala.Tuple2;

/**
 * The reduce side of a shuffle the engine groups by key hash ({@link HashGroups}): the engine
 * merges the map outputs' runs so that records of equal key hash arrive one after another, and
 * this iterator folds each run of equal hashes as it passes, holding only that run's keys. Spark's
 * reader would instead build a hash map of every key of the partition in the heap.
 *
 * <p>Within a run the keys are told apart with {@code equals} (a list per run: runs of more than
 * one key are hash collisions, rare for the keys {@link HashGroups#trusted} admits). Records are
 * combiners when the map side combined ({@code mergeCombiners}), values otherwise ({@code
 * createCombiner}, then {@code mergeValue}), exactly as Spark's reader would fold them. The first
 * key whose hash is not trusted starts the partition's tail of such keys (they sort last): that
 * tail goes to Spark's own aggregator.
 */
public final class GroupedCombine<K, C> extends scala.collection.AbstractIterator<Product2<K, C>> {
  private final Aggregator<K, Object, C> agg;
  private final boolean combined;
  private final TaskContext context;
  private final scala.collection.Iterator<Product2<K, Object>> in;
  /** The next run's first record, read while ending the previous run. */
  private Product2<K, Object> ahead;
  /** The current run's keys and combiners, handed out from {@link #at}. */
  private final ArrayList<K> keys = new ArrayList<>();
  private final ArrayList<C> combiners = new ArrayList<>();
  private int at;
  /** Spark's aggregation of the untrusted tail, once reached. */
  private scala.collection.Iterator<Product2<K, C>> tail;

  @SuppressWarnings("unchecked")
  public GroupedCombine(
      Aggregator<K, ?, C> agg,
      boolean combined,
      TaskContext context,
      scala.collection.Iterator<? extends Product2<K, ?>> in) {
    this.agg = (Aggregator<K, Object, C>) agg;
    this.combined = combined;
    this.context = context;
    this.in = (scala.collection.Iterator<Product2<K, Object>>) in;
  }

  @Override
  public boolean hasNext() {
    if (at < keys.size()) {
      return true;
    }
    if (tail != null) {
      return tail.hasNext();
    }
    return nextRun();
  }

  @Override
  public Product2<K, C> next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    if (at < keys.size()) {
      Tuple2<K, C> t = new Tuple2<>(keys.get(at), combiners.get(at));
      at++;
      return t;
    }
    return tail.next();
  }

  /** Folds the next run of equal hashes; false at the end. */
  private boolean nextRun() {
    keys.clear();
    combiners.clear();
    at = 0;
    Product2<K, Object> first = ahead;
    ahead = null;
    if (first == null) {
      if (!in.hasNext()) {
        return false;
      }
      first = in.next();
    }
    if (!HashGroups.trusted(first._1())) {
      tail = sparkTail(first);
      return tail.hasNext();
    }
    int hash = HashGroups.hash(first._1());
    add(first);
    while (in.hasNext()) {
      Product2<K, Object> r = in.next();
      K k = r._1();
      if (!HashGroups.trusted(k) || HashGroups.hash(k) != hash) {
        ahead = r;
        break;
      }
      add(r);
    }
    return true;
  }

  /** Spark's aggregation of the rest of the input, from {@code first} on. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private scala.collection.Iterator<Product2<K, C>> sparkTail(Product2<K, Object> first) {
    Prepended rest = new Prepended<>(first, in);
    return (scala.collection.Iterator)
        (combined
            ? agg.combineCombinersByKey(rest, context)
            : agg.combineValuesByKey(rest, context));
  }

  /** Folds one record into the current run. */
  @SuppressWarnings("unchecked")
  private void add(Product2<K, Object> r) {
    K k = r._1();
    Object x = r._2();
    for (int i = 0; i < keys.size(); i++) {
      if (Objects.equals(keys.get(i), k)) {
        C c = combiners.get(i);
        combiners.set(
            i, combined ? agg.mergeCombiners().apply(c, (C) x) : agg.mergeValue().apply(c, x));
        return;
      }
    }
    keys.add(k);
    combiners.add(combined ? (C) x : agg.createCombiner().apply(x));
  }
}

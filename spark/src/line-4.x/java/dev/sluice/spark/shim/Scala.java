package dev.sluice.spark.shim;

import java.util.List;
import java.util.function.Function;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Scala's collections as Sluice's Java code uses them, Scala 2.13's side (Spark 4.0 and later).
 * Spark's signatures name {@code scala.collection.immutable.Seq} on 2.13 and {@code
 * scala.collection.Seq} on 2.12; Sluice's code holds the immutable one and passes what Spark
 * returns through {@link #seq(scala.collection.Seq)}, so one source compiles against both. This
 * class is in {@code src/line-4.x/java} (every 4.x line, Scala 2.13) and {@code
 * src/line-3.5/java} (Scala 2.12), with the same methods.
 */
public final class Scala {
  private Scala() {}

  /** A Scala sequence as a Java list (a view, not a copy). */
  public static <A> List<A> asJava(scala.collection.Seq<A> seq) {
    return CollectionConverters.asJava(seq);
  }

  /** A Scala map as a Java map (a view, not a copy). */
  public static <K, V> java.util.Map<K, V> asJava(scala.collection.Map<K, V> map) {
    return CollectionConverters.asJava(map);
  }

  /** A Java list as an immutable Scala sequence (a copy). */
  public static <A> Seq<A> seq(List<A> list) {
    return scala.collection.immutable.List$.MODULE$.from(CollectionConverters.asScala(list));
  }

  /** A sequence Spark returned, as the immutable sequence it is on 2.13 (no copy). */
  public static <A> Seq<A> seq(scala.collection.Seq<A> seq) {
    return (Seq<A>) seq;
  }

  /** {@code f} applied to each element of {@code seq}, in order. */
  public static <A, B> Seq<B> map(scala.collection.Seq<A> seq, Function<? super A, B> f) {
    return seq(asJava(seq).stream().<B>map(f).toList());
  }

  /** A Java map as an immutable Scala map (a copy). */
  public static <K, V> Map<K, V> map(java.util.Map<K, V> map) {
    return scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(map));
  }

}

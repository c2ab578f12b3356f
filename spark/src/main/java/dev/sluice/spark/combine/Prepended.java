package dev.sluice.spark.combine;

/** One element, then the rest of an iterator (to hand a stream on after peeking at it). */
public final class Prepended<T> extends scala.collection.AbstractIterator<T> {
  private T first;
  private boolean firstTaken;
  private final scala.collection.Iterator<? extends T> rest;

  Prepended(T first, scala.collection.Iterator<? extends T> rest) {
    this.first = first;
    this.rest = rest;
  }

  @Override
  public boolean hasNext() {
    return !firstTaken || rest.hasNext();
  }

  @Override
  public T next() {
    if (!firstTaken) {
      firstTaken = true;
      T t = first;
      first = null;
      return t;
    }
    return rest.next();
  }
}

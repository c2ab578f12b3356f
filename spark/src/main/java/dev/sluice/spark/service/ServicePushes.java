package dev.sluice.spark.service;

import org.apache.spark.util.AccumulatorV2;

/**
 * The map outputs of one service shuffle that went to the daemons, counted by the map tasks (an
 * accumulator the shuffle's handle carries) and merged in the driver, where the first output
 * pushed turns reduce-side locality off ({@link ReduceLocality}).
 *
 * <p>Spark's scheduler merges a finished map task's accumulator updates before it registers the
 * task's map status, on the thread that later submits the reduce stage: so locality is off before
 * any reduce task can prefer the service's location, and stays on for an application whose service
 * shuffles all stayed on their executors (each output small, {@link ServiceConf#keepReason}), where
 * it places reduce tasks beside their inputs as in embedded mode.
 */
public final class ServicePushes extends AccumulatorV2<Long, Long> {
  private static final long serialVersionUID = 1L;

  private long pushed;

  @Override
  public boolean isZero() {
    return pushed == 0;
  }

  @Override
  public ServicePushes copy() {
    ServicePushes c = new ServicePushes();
    c.pushed = pushed;
    return c;
  }

  @Override
  public void reset() {
    pushed = 0;
  }

  @Override
  public void add(Long v) {
    pushed += v;
  }

  /** Counts one map output pushed (on an executor). */
  public void pushed() {
    pushed++;
  }

  @Override
  public void merge(AccumulatorV2<Long, Long> other) {
    long more = other.value();
    pushed += more;
    if (more > 0) {
      ReduceLocality.off();
    }
  }

  @Override
  public Long value() {
    return pushed;
  }
}

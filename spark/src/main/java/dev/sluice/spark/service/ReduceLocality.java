package dev.sluice.spark.service;

import java.lang.reflect.Field;
import org.apache.spark.MapOutputTracker;
import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reduce-side locality, turned off in the driver of an application once a map output of one of
 * its shuffles has gone to the daemons ({@link ServicePushes}).
 *
 * <p>Spark prefers, for each reduce task, the hosts that hold at least a fifth of its input
 * ({@code MapOutputTrackerMaster.getPreferredLocationsForShuffle}, under {@code
 * spark.shuffle.reduceLocality.enabled}). A service shuffle's pushed outputs sit at a host of no
 * executor ({@code sluice-service}), its small outputs and those of failed pushes at executors.
 * Once one task of a stage prefers a live executor's host, Spark's delay scheduling holds back the
 * tasks that prefer the service's host for {@code spark.locality.wait} at each locality level (3
 * s by default) and, in local mode, which offers its cores again only when a task ends, for ever:
 * the task is never launched. No host is nearer to a daemon's stream than another in Spark's
 * terms (the owning daemon differs per partition, a map status names one location), so the
 * preference buys nothing; Uniffle turns the same setting off for the same reason.
 *
 * <p>Until then it stays on: an application whose service shuffles all stayed on their executors
 * (small outputs, small shuffles) places its reduce tasks beside their inputs as in embedded mode,
 * and fetches less across the network (TPC-H q13 at sf 1 on the loopback cluster, with every
 * output kept: 0.88x of embedded with locality off, as embedded with locality off itself).
 *
 * <p>The map output tracker reads the setting once, when the SparkContext starts, before a shuffle
 * manager or plugin can change it, so the driver turns off its tracker's copy of it. Where that
 * copy cannot be reached (a Spark that renamed it), the driver logs once what to set instead.
 */
public final class ReduceLocality {
  private static final Logger LOG = LoggerFactory.getLogger(ReduceLocality.class);

  /** The tracker whose locality was turned off last (one per SparkContext). */
  private static volatile MapOutputTracker done;

  private ReduceLocality() {}

  /** Turns reduce-side locality off in this driver's map output tracker, once per tracker. */
  public static void off() {
    SparkEnv env = SparkEnv.get();
    MapOutputTracker tracker = env == null ? null : env.mapOutputTracker();
    if (!(tracker instanceof MapOutputTrackerMaster) || tracker == done) {
      return;
    }
    synchronized (ReduceLocality.class) {
      if (tracker == done) {
        return;
      }
      done = tracker;
      try {
        Field f = MapOutputTrackerMaster.class.getDeclaredField("shuffleLocalityEnabled");
        f.setAccessible(true);
        if (f.getBoolean(tracker)) {
          f.setBoolean(tracker, false);
          LOG.info(
              "Sluice: reduce-side locality off for this application"
                  + " (spark.shuffle.reduceLocality.enabled): its service shuffles' outputs are"
                  + " at the daemons");
        }
      } catch (ReflectiveOperationException | RuntimeException e) {
        LOG.warn(
            "Sluice: could not turn reduce-side locality off ({}); set"
                + " spark.shuffle.reduceLocality.enabled=false, or reduce tasks of shuffles with"
                + " outputs both at the daemons and on executors wait spark.locality.wait",
            e.toString());
      }
    }
  }
}

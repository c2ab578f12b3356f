package dev.sluice.spark.suites;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.scalatest.Args;
import org.scalatest.Reporter;
import org.scalatest.Status;
import org.scalatest.events.Event;
import org.scalatest.events.TestFailed;

/**
 * Spark tests whose assertion holds only when two stages that run at once end in a given order: a
 * race that Spark's own code names (a comment, a delay put into one side), whose outcome depends on
 * the machine's load and on how long each stage's tasks take, the shuffle manager's writes among
 * them. Each test here runs a second time when its first run reports a failure, much as Spark's own
 * {@code testRetry} runs the tests it knows to be timing-dependent (that one up to three times);
 * the first failure is printed with its stack trace, never hidden, and if the second run fails too
 * the test is reported failed (and the run's exit status with it). Unlike {@link Exclusions}, every
 * test here is run and its assertion checked.
 */
public final class TimingRaces {
  /**
   * One timing-dependent test: its suite, its exact name, the race its assertion depends on, and
   * the first Spark line whose suite has the test ({@link SuiteLines}).
   */
  public record Race(String suite, String test, String race, String since) {}

  public static final List<Race> LIST =
      List.of(
          new Race(
              "AdaptiveQueryExecSuite",
              "SPARK-37753: Inhibit broadcast in left outer join when there are many empty"
                  + " partitions on outer/left side",
              "the test asserts that no broadcast join is planned, which holds only when the left"
                  + " side's stage (a filter of testData, two tasks of tens of milliseconds) ends"
                  + " before adaptive execution replans on the end of the right side's (a 300 ms"
                  + " UDF per row: Spark's own delay for this race). Both stages are submitted at"
                  + " once onto two task slots; when the right side's tasks take both slots"
                  + " first, the left side's start only as they end, and whether they end before"
                  + " the replan is a matter of tens of milliseconds. Seen failing under Sluice"
                  + " once in CI (two lanes on two cores) and once in 4 runs of the test alone in a"
                  + " fresh JVM beside three busy processes (plain Spark: none in 4), passing in 6"
                  + " of 6 runs after other tests of the suite under each",
              SuiteLines.OLDEST));

  private TimingRaces() {}

  /** Adds this list's tests of {@code suite} to the tests that suite must have. */
  static void look(SuiteLines.Missing missing) {
    for (Race r : LIST) {
      missing.look(r.suite(), r.test(), r.since());
    }
  }

  /**
   * Runs {@code test} of {@code suite} through {@code runTest}; a test on this list whose first run
   * reports a failure runs once more, its first run's events held back and its failure printed
   * with its stack trace. A first run that throws, or whose status carries an exception that no
   * event reported (a failing {@code afterEach}), is handed on as it is, its events first: only a
   * reported test failure is retried.
   */
  public static Status run(String suite, String test, Args args, Function<Args, Status> runTest) {
    Race race = find(suite, test);
    if (race == null) {
      return runTest.apply(args);
    }
    Held held = new Held();
    Status first;
    try {
      first = runTest.apply(withReporter(args, held));
    } catch (RuntimeException | Error e) {
      held.replay(args.reporter());
      throw e;
    }
    try {
      first.waitUntilCompleted();
    } catch (RuntimeException | Error e) {
      // The status rethrows what the run left unreported; it still carries it.
      held.replay(args.reporter());
      return first;
    }
    TestFailed failed = held.failed();
    if (failed == null || first.unreportedException().isDefined()) {
      held.replay(args.reporter());
      return first;
    }
    System.out.println(
        "- "
            + test
            + " FAILED ON ITS FIRST RUN, RUNS AGAIN (a timing race: "
            + race.race()
            + "); the first run's failure: "
            + failed.message());
    if (failed.throwable().isDefined()) {
      failed.throwable().get().printStackTrace(System.out);
    }
    return runTest.apply(args);
  }

  private static Race find(String suite, String test) {
    for (Race r : LIST) {
      if (r.suite().equals(suite) && r.test().equals(test)) {
        return r;
      }
    }
    return null;
  }

  private static Args withReporter(Args args, Reporter reporter) {
    return new Args(
        reporter,
        args.stopper(),
        args.filter(),
        args.configMap(),
        args.distributor(),
        args.tracker(),
        args.chosenStyles(),
        args.runTestInNewInstance(),
        args.distributedTestSorter(),
        args.distributedSuiteSorter());
  }

  /** A reporter that holds a run's events, and its failure if it reports one. */
  private static final class Held implements Reporter {
    private final List<Event> events = new ArrayList<>();
    private TestFailed failed;

    @Override
    public synchronized void apply(Event event) {
      events.add(event);
      if (event instanceof TestFailed f) {
        failed = f;
      }
    }

    synchronized TestFailed failed() {
      return failed;
    }

    synchronized void replay(Reporter to) {
      for (Event e : events) {
        to.apply(e);
      }
      events.clear();
    }
  }
}

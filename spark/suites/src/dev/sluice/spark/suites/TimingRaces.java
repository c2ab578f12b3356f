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
 * Spark tests whose assertion holds only when two stages that run at once finish in a given order,
 * which no shuffle manager decides: on a loaded machine either order comes, under plain Spark as
 * under Sluice. Spark marks such tests in its own code (a comment, a delay in one side) but runs
 * them once. Each test here runs a second time when its first run fails, as Spark's own {@code
 * testRetry} runs the tests it knows to be timing-dependent; the first failure is printed, never
 * hidden, and the test fails if the second run fails too. Unlike {@link Exclusions}, every test
 * here is run and its assertion checked.
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
                  + " the replan is a matter of tens of milliseconds. Seen failing once in CI (two"
                  + " lanes on two cores) and once in 4 runs of the test alone in a fresh JVM"
                  + " beside three busy processes, passing in 6 of 6 runs of it after other tests",
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
   * reports a failure runs once more, its first run's events held back and its failure printed.
   */
  public static Status run(String suite, String test, Args args, Function<Args, Status> runTest) {
    Race race = find(suite, test);
    if (race == null) {
      return runTest.apply(args);
    }
    Held held = new Held();
    Status first = runTest.apply(withReporter(args, held));
    first.waitUntilCompleted();
    if (held.failure == null) {
      held.replay(args.reporter());
      return first;
    }
    System.out.println(
        "- "
            + test
            + " FAILED ON ITS FIRST RUN, RUNS AGAIN (a timing race: "
            + race.race()
            + "); the first run's failure: "
            + held.failure);
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

  /** A reporter that holds a run's events, and the message of its failure if it reports one. */
  private static final class Held implements Reporter {
    private final List<Event> events = new ArrayList<>();
    private String failure;

    @Override
    public synchronized void apply(Event event) {
      events.add(event);
      if (event instanceof TestFailed failed) {
        failure = failed.message();
      }
    }

    synchronized void replay(Reporter to) {
      for (Event e : events) {
        to.apply(e);
      }
    }
  }
}

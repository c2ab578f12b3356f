package dev.sluice.spark.shuffle;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.stream.Stream;
import org.apache.spark.SparkEnv;

/**
 * A reduce task's directory for the engine's spill files (a native sort's runs, an offloaded
 * aggregate's sorted state): created in Spark's local directories (its disk block manager picks
 * the place and a random name, as for Spark's own temporary blocks), readable by the executor's
 * user only, and removed with everything in it when the task ends, however it ends. When an
 * executor dies, its local directories go with Spark's own cleanup.
 */
public final class TaskSpillDir {
  private final Path dir;

  private TaskSpillDir(Path dir) {
    this.dir = dir;
  }

  /** A fresh directory of this executor's Spark local directories. */
  public static TaskSpillDir create() {
    File where = SparkEnv.get().blockManager().diskBlockManager().createTempLocalBlock()._2();
    try {
      Path dir =
          Files.createDirectory(
              where.toPath(),
              PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
      return new TaskSpillDir(dir);
    } catch (IOException e) {
      throw new UncheckedIOException("Sluice: cannot create a spill directory at " + where, e);
    }
  }

  public String path() {
    return dir.toString();
  }

  /** Removes the directory and whatever the engine left in it. */
  public void remove() {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> all = Files.walk(dir)) {
      all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // The directory is under Spark's local directories, which Spark removes at exit.
    }
  }
}

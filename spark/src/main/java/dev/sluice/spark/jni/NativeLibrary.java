package dev.sluice.spark.jni;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;

/**
 * Loads the engine's native library once per JVM and remembers whether it could: where it cannot
 * (a platform the jar carries no library for, a temporary directory mounted {@code noexec}, a
 * wrong {@code sluice.native.library}), Sluice runs every shuffle of the JVM on Spark's sort
 * shuffle ({@code Coverage.settingsReason}) instead of failing tasks.
 *
 * <p>The library travels inside the jar ({@value #RESOURCE}). It is copied into the directory the
 * shuffle manager names (one of Spark's local directories), or the JVM's temporary directory
 * before that, loaded, and the copy deleted at once: the loaded mapping outlives the file, so
 * nothing is left behind however the JVM ends. The system property {@value #OVERRIDE_PROPERTY}
 * names a library file to load instead.
 */
public final class NativeLibrary {
  /** Where the jar carries the linux x86-64 library. */
  static final String RESOURCE = "/native/linux-x86_64/libsluice_jni.so";

  /** The system property naming a library file to load instead of the jar's. */
  public static final String OVERRIDE_PROPERTY = "sluice.native.library";

  private static boolean tried;
  /** Why the library could not be loaded; null once it is loaded. */
  private static String unavailable;

  private NativeLibrary() {}

  /**
   * Loads the library the first time this JVM asks, copying it into {@code dir} (null: the JVM's
   * temporary directory); returns null when it is loaded, or why it cannot be (the same answer on
   * every later call, whatever {@code dir}).
   */
  public static synchronized String load(String dir) {
    if (!tried) {
      tried = true;
      try {
        loadOnce(dir);
        unavailable = null;
      } catch (UnsatisfiedLinkError | IOException | SecurityException e) {
        unavailable = e.getClass().getSimpleName() + ": " + e.getMessage();
      }
    }
    return unavailable;
  }

  /** Why the library is not loaded (loading it first if no one asked yet), or null. */
  public static String unavailableReason() {
    return load(null);
  }

  private static void loadOnce(String dir) throws IOException {
    String override = System.getProperty(OVERRIDE_PROPERTY);
    if (override != null && !override.isEmpty()) {
      System.load(override);
      return;
    }
    String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT);
    String arch = System.getProperty("os.arch", "");
    if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      throw new UnsatisfiedLinkError(
          "Sluice's jar carries a native library for linux x86-64 only, not " + os + "/" + arch);
    }
    try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new UnsatisfiedLinkError("the jar does not carry " + RESOURCE);
      }
      Path where =
          dir != null ? Paths.get(dir) : Paths.get(System.getProperty("java.io.tmpdir", "/tmp"));
      Files.createDirectories(where);
      Path copy = Files.createTempFile(where, "libsluice_jni", ".so");
      try {
        Files.copy(in, copy, StandardCopyOption.REPLACE_EXISTING);
        System.load(copy.toAbsolutePath().toString());
      } finally {
        Files.deleteIfExists(copy);
      }
    }
  }
}

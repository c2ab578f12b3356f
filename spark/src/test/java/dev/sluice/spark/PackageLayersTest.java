package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.shuffle.EngineShuffles;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The plugin's packages depend one way, as the Rust crates do: each names only the packages below
 * it in {@link #LAYERS}, so no two depend on each other and no cycle runs through the root
 * package. A reference is an import or a fully qualified name in code (comments and strings are
 * left out: a Javadoc link may point up).
 */
class PackageLayersTest {
  /**
   * Bottom to top, by the name after {@code dev.sluice.spark} ("" is the root package): the
   * version shims; the types every part and the user name (aggregates, settings, limits, the
   * exception); the JNI boundary; the counters; the client of the service's daemons; Spark's
   * combiners; native sorts and row framing; a Sluice shuffle; offloaded operators; the entry
   * points a user names (the shuffle manager, the operators' API); the Spark SQL extension; the
   * example jobs.
   */
  static final List<String> LAYERS =
      List.of(
          "shim", "api", "jni", "metrics", "service", "combine", "sort", "shuffle", "ops", "",
          "sql", "examples");

  private static final Pattern PACKAGE =
      Pattern.compile("^package dev\\.sluice\\.spark(?:\\.(\\w+))?;", Pattern.MULTILINE);
  private static final Pattern REFERENCE =
      Pattern.compile("dev\\.sluice\\.spark\\.(?:([a-z]\\w*)\\.)?([A-Z]\\w*)");
  private static final Pattern COMMENTS_AND_STRINGS =
      Pattern.compile("/\\*.*?\\*/|//[^\\n]*|\"(?:\\\\.|[^\"\\\\\\n])*\"", Pattern.DOTALL);

  @Test
  void everyPackageNamesOnlyThePackagesBelowIt() throws IOException {
    List<Path> sources = new ArrayList<>();
    try (Stream<Path> roots = Files.list(Paths.get("src"))) {
      for (Path root : roots.toList()) {
        Path java = root.getFileName().toString().equals("test") ? null : root.resolve("java");
        if (java != null && Files.isDirectory(java)) {
          try (Stream<Path> files = Files.walk(java)) {
            files.filter(f -> f.toString().endsWith(".java")).forEach(sources::add);
          }
        }
      }
    }
    assertTrue(sources.size() > 50, "the plugin's sources under spark/src: " + sources.size());
    TreeSet<String> upward = new TreeSet<>();
    TreeSet<String> seen = new TreeSet<>();
    for (Path f : sources) {
      String name = f.getFileName().toString().replace(".java", "");
      String text = read(f);
      seen.add(packageOf(text, f));
      upward.addAll(upwardReferences(name, text, f));
    }
    assertEquals(new TreeSet<>(LAYERS), seen, "every package has its layer, every layer a package");
    assertTrue(upward.isEmpty(), "references to a package above: " + String.join("\n", upward));
  }

  @Test
  void aReferenceUpwardIsFound() {
    String below =
        "package dev.sluice.spark.shuffle;\n"
            + "import dev.sluice.spark.ops.OpSpec;\n"
            + "/** {@link dev.sluice.spark.Sluice} */\n"
            + "class A { String s = \"dev.sluice.spark.sql.X\"; Object o = dev.sluice.spark.Sluice"
            + ".class; dev.sluice.spark.sort.SortKind k; }\n";
    assertEquals(
        List.of("shuffle/A -> ops/OpSpec", "shuffle/A -> root/Sluice"),
        upwardReferences("A", below, Paths.get("A.java")));
  }

  @Test
  void theManagerClassThePartsBelowNameIsTheShuffleManager() {
    // The parts below the root package ask for Sluice's shuffle manager by a marker interface and
    // name its class in messages without referring to it.
    assertEquals(SluiceShuffleManager.class.getName(), EngineShuffles.MANAGER_CLASS);
    assertTrue(EngineShuffles.class.isAssignableFrom(SluiceShuffleManager.class));
  }

  /** {@code text}'s references to classes of packages above its own, as "from -> to". */
  static List<String> upwardReferences(String name, String text, Path f) {
    String from = packageOf(text, f);
    String code = COMMENTS_AND_STRINGS.matcher(text).replaceAll("");
    List<String> out = new ArrayList<>();
    Matcher m = REFERENCE.matcher(code);
    while (m.find()) {
      String to = m.group(1) == null ? "" : m.group(1);
      if (!to.equals(from) && layer(to, f) > layer(from, f)) {
        out.add(shown(from) + "/" + name + " -> " + shown(to) + "/" + m.group(2));
      }
    }
    return out.stream().distinct().sorted().toList();
  }

  private static String packageOf(String text, Path f) {
    Matcher m = PACKAGE.matcher(text);
    assertTrue(m.find(), f + " declares no package of the plugin");
    return m.group(1) == null ? "" : m.group(1);
  }

  private static int layer(String pkg, Path f) {
    int i = LAYERS.indexOf(pkg);
    assertTrue(i >= 0, f + " names package '" + pkg + "', which has no layer in LAYERS");
    return i;
  }

  private static String shown(String pkg) {
    return pkg.isEmpty() ? "root" : pkg;
  }

  private static String read(Path f) {
    try {
      return Files.readString(f);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}

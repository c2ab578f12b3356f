package dev.sluice.spark.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The per-line source folders give every line the same shim: a class that more than one folder
 * defines has the same public and protected methods (name and number of parameters) in each, and
 * every line's build sees each shim class once. Only the default line is compiled by this build;
 * this check is what keeps the others' classes from drifting between their builds.
 */
class LineFoldersTest {
  private static final Path SRC = Path.of("src");

  /** The folders each line's build adds (the Maven profiles' source folders). */
  private static final Map<String, List<String>> LINES =
      Map.of(
          "3.5", List.of("line-3.5", "line-before-4.1"),
          "4.0", List.of("line-4.0", "line-before-4.1", "line-4.x"),
          "4.1", List.of("line-4.1", "line-4.1-on", "line-4.x"),
          "4.2", List.of("line-4.2", "line-4.1-on", "line-4.x"),
          "4.3", List.of("line-4.3", "line-4.1-on", "line-4.x"));

  private static final Pattern METHOD =
      Pattern.compile(
          "\\n  (?:public|protected) (?:static )?(?:final )?(?:abstract )?"
              + "(?:<[^>]+> )?[\\w.<>?, \\[\\]]+ (\\w+)\\(([^)]*)\\)");

  @Test
  void everyLineSeesTheSameShimMethods() throws IOException {
    Map<String, Map<String, TreeSet<String>>> byClass = new TreeMap<>();
    for (Map.Entry<String, List<String>> line : LINES.entrySet()) {
      Map<String, TreeSet<String>> classes = new TreeMap<>();
      for (String folder : line.getValue()) {
        Path dir = SRC.resolve(folder).resolve("java/dev/sluice/spark/shim");
        assertTrue(Files.isDirectory(dir), dir + " is missing");
        try (Stream<Path> files = Files.list(dir)) {
          for (Path f : files.toList()) {
            String name = f.getFileName().toString().replace(".java", "");
            TreeSet<String> methods = methods(Files.readString(f, StandardCharsets.UTF_8));
            TreeSet<String> before = classes.put(name, methods);
            // A folder listed twice for a line (none now) would be the same file.
            assertTrue(before == null || before.equals(methods), line.getKey() + ": " + name);
          }
        }
      }
      // The methods of LaterLines or EarlierLines are LineShim's on the lines that extend it.
      for (String base : List.of("LaterLines", "EarlierLines")) {
        TreeSet<String> inherited = classes.remove(base);
        if (inherited != null) {
          classes.get("LineShim").addAll(inherited);
        }
      }
      for (Map.Entry<String, TreeSet<String>> c : classes.entrySet()) {
        byClass.computeIfAbsent(c.getKey(), k -> new TreeMap<>()).put(line.getKey(), c.getValue());
      }
    }
    for (String shim : List.of("LineShim", "Scala", "LinePlan", "Strings", "Sessions")) {
      Map<String, TreeSet<String>> lines = byClass.get(shim);
      assertEquals(LINES.keySet(), lines.keySet(), shim + " is not on every line");
      TreeSet<String> first = lines.values().iterator().next();
      assertFalse(first.isEmpty(), shim + ": no methods found");
      for (Map.Entry<String, TreeSet<String>> l : lines.entrySet()) {
        assertEquals(first, l.getValue(), shim + " on Spark " + l.getKey());
      }
    }
  }

  /** Each public or protected method as {@code name/parameters}. */
  private static TreeSet<String> methods(String source) {
    TreeSet<String> out = new TreeSet<>();
    Matcher m = METHOD.matcher(source);
    while (m.find()) {
      String params = m.group(2).strip();
      int n = params.isEmpty() ? 0 : params.split(",(?![^<]*>)").length;
      out.add(m.group(1) + "/" + n);
    }
    return out;
  }
}

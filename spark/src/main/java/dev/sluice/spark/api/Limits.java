package dev.sluice.spark.api;

/**
 * The engine's fixed limits that the settings bound and the messages name, with byte sizes
 * written as the settings and the messages write them.
 */
public final class Limits {
  private Limits() {}

  /**
   * The largest engine record, lengths included (768 MiB): a record must fit one Sluice block,
   * whose payload is at most {@code BLOCK_UNCOMPRESSED_BYTES_MAX} in {@code
   * crates/sluice-core/src/format/limits.rs} ({@code RECORD_BYTES_MAX} there; a test checks that
   * the two agree). {@code spark.sluice.recordBytesMax} may set a lower limit.
   */
  public static final long RECORD_BYTES_MAX = 768L << 20;

  /**
   * {@code bytes} in the largest binary unit that divides it (bytes, KiB ... TiB), for messages.
   */
  public static String sizeText(long bytes) {
    String[] units = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u + 1 < units.length && bytes != 0 && bytes % 1024 == 0) {
      bytes /= 1024;
      u++;
    }
    return bytes == 1 && u == 0 ? "1 byte" : bytes + " " + units[u];
  }
}

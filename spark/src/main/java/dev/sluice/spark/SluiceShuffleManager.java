package dev.sluice.spark;

import dev.sluice.spark.api.SluiceException;
import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.jni.EngineSettings;
import dev.sluice.spark.jni.NativeLibrary;
import dev.sluice.spark.jni.ServiceNative;
import dev.sluice.spark.jni.SluiceNative;
import dev.sluice.spark.jni.SpillStrategy;
import dev.sluice.spark.ops.OpSpec;
import dev.sluice.spark.ops.SluiceOpReader;
import dev.sluice.spark.ops.SluiceOpSerializer;
import dev.sluice.spark.ops.SluiceOpWriter;
import dev.sluice.spark.service.Assignment;
import dev.sluice.spark.service.CurrentAssignment;
import dev.sluice.spark.service.Daemons;
import dev.sluice.spark.service.ServiceConf;
import dev.sluice.spark.service.ServiceFailures;
import dev.sluice.spark.shuffle.Coverage;
import dev.sluice.spark.shuffle.EngineShuffles;
import dev.sluice.spark.shuffle.RowShuffleReader;
import dev.sluice.spark.shuffle.ServiceReads;
import dev.sluice.spark.shuffle.ShuffleKind;
import dev.sluice.spark.shuffle.SluiceConf;
import dev.sluice.spark.shuffle.SluiceSerializerManager;
import dev.sluice.spark.shuffle.SluiceShuffleHandle;
import dev.sluice.spark.shuffle.SluiceShuffleWriter;
import dev.sluice.spark.shuffle.SparkLine;
import dev.sluice.spark.sort.SortKind;
import dev.sluice.spark.sort.SortedRowSerializer;
import java.io.IOException;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Spark's shuffle manager backed by the Sluice engine embedded in each executor. Switched on with
 * {@code spark.shuffle.manager=dev.sluice.spark.SluiceShuffleManager}.
 *
 * <p>Map tasks serialize records with the shuffle's serializer straight into direct buffers
 * (partition ids from the Spark partitioner) and hand them to the engine, whose offload threads
 * group them by partition while the task goes on; the attempt's output is written in Spark's
 * data and index file layout (Sluice blocks inside each partition's segment), so Spark's block
 * manager and external shuffle service serve it unchanged. Reduce tasks fetch through Spark's own
 * fetch machinery; the blocks are decoded and verified natively (a corrupt block is a fetch
 * failure), and Spark's reader does the rest (reduce-side aggregation, key ordering).
 *
 * <p>A shuffle Sluice does not cover (see {@link Coverage}) runs on Spark's sort shuffle, which
 * this class extends: the decision is per shuffle and is logged once, on the driver.
 */
public class SluiceShuffleManager extends SortShuffleManager implements EngineShuffles {
  private static final Logger LOG = LoggerFactory.getLogger(SluiceShuffleManager.class);

  /** The most partitions a Sluice shuffle may have. */
  public static final int PARTITIONS_MAX = Coverage.PARTITIONS_MAX;

  private final SparkConf conf;
  /** {@link SluiceSetting#OPERATOR_SPILL}, checked when the manager starts. */
  private final SpillStrategy operatorSpill;
  /** Spark shuffle id to the engine's id for it, in this process. */
  private final ConcurrentHashMap<Integer, Integer> engineIds = new ConcurrentHashMap<>();
  /** The service shuffles this process (the driver) registered at the daemons. */
  private final Set<Integer> serviceShuffles = ConcurrentHashMap.newKeySet();

  /** Map task ids whose output files this process wrote, per Sluice shuffle. */
  private final ConcurrentHashMap<Integer, Set<Long>> mapIds = new ConcurrentHashMap<>();

  public SluiceShuffleManager(SparkConf conf) {
    super(conf);
    this.conf = conf;
    this.operatorSpill = SluiceConf.spillStrategy(conf);
    String line = SparkLine.mismatchReason();
    if (line != null) {
      // Nothing of Sluice's runs here; even finding a directory for the library calls APIs of
      // the jar's own Spark line.
      LOG.warn("Sluice: {}; every shuffle runs on Spark's sort shuffle", line);
      return;
    }
    String why = NativeLibrary.load(libraryDir(conf));
    if (why != null) {
      LOG.warn(
          "Sluice: the native library cannot be loaded in this JVM ({}); every shuffle planned"
              + " here runs on Spark's sort shuffle",
          why);
    }
  }

  /**
   * Where the native library is copied before it is loaded: one of Spark's local directories
   * (which a cluster manager may point at volumes of its own), or null (the JVM's temporary
   * directory) when none can be made.
   */
  private static String libraryDir(SparkConf conf) {
    try {
      return org.apache.spark.util.Utils.getLocalDir(conf);
    } catch (RuntimeException e) {
      return null;
    }
  }

  /**
   * Fails a task given a Sluice shuffle on an executor that cannot load the native library: the
   * driver loaded it and planned the shuffle for Sluice, so the map outputs are (or will be)
   * Sluice's and Spark's sort shuffle cannot stand in for it here.
   */
  private static void requireLibrary(ShuffleHandle handle) {
    String why = NativeLibrary.unavailableReason();
    if (why != null) {
      throw new SluiceException(
          "Sluice's native library cannot be loaded on this executor ("
              + why
              + "), but the driver planned shuffle "
              + handle.shuffleId()
              + " for Sluice: run the executors where the driver's library loads, or set"
              + " spark.shuffle.manager=sort");
    }
  }

  @Override
  public <K, V, C> ShuffleHandle registerShuffle(
      int shuffleId, ShuffleDependency<K, V, C> dependency) {
    int maps = dependency.rdd().getNumPartitions();
    if (dependency.serializer() instanceof SluiceOpSerializer) {
      // An offloaded operator (Sluice.reduceByKey): only the engine can run it; Sluice's API
      // checked the settings before it built the shuffle.
      OpSpec op = ((SluiceOpSerializer) dependency.serializer()).op;
      ShuffleKind kind = new ShuffleKind.Operator(op, operatorSpill);
      return handle(shuffleId, dependency, maps, kind);
    }
    String reason = Coverage.fallbackReason(conf, dependency);
    if (dependency.serializer() instanceof SortedRowSerializer) {
      // A Spark SQL ORDER BY whose plan counts on the engine's sort (NativeSortRule checked the
      // same conditions before it planned it): falling back would lose the order.
      if (reason != null) {
        throw new IllegalStateException(
            "Sluice: shuffle " + shuffleId + " was planned as a native sort, but " + reason);
      }
      LOG.info("Sluice: shuffle {} (Spark SQL rows) is sorted by the engine", shuffleId);
      ShuffleKind kind = new ShuffleKind.Ordered(SortKind.ROWS);
      return handle(shuffleId, dependency, maps, kind);
    }
    if (reason != null) {
      LOG.info("Sluice: shuffle {} runs on Spark's sort shuffle: {}", shuffleId, reason);
      return super.registerShuffle(shuffleId, dependency);
    }
    SortKind sortKind = SortKind.NONE;
    if (dependency.keyOrdering().isDefined()
        && dependency.aggregator().isEmpty()
        && !dependency.mapSideCombine()) {
      sortKind = SortKind.of(dependency.keyOrdering().get());
      if (sortKind != SortKind.NONE) {
        LOG.info("Sluice: shuffle {} is sorted by the engine (map runs, reduce merge)", shuffleId);
      }
    } else if (dependency.aggregator().isDefined()
        && dependency.keyOrdering().isEmpty()
        && SluiceSetting.GROUPED_COMBINE.flag(conf)) {
      sortKind = SortKind.HASH;
      LOG.info("Sluice: shuffle {} is grouped by key hash in the engine", shuffleId);
    }
    ShuffleKind kind =
        sortKind == SortKind.NONE ? new ShuffleKind.Plain() : new ShuffleKind.Ordered(sortKind);
    return handle(shuffleId, dependency, maps, kind);
  }

  /**
   * The handle of a Sluice shuffle: in service mode, for the shuffles the daemons cover ({@link
   * SluiceShuffleHandle#serviceCovers}), with its generation and owners at the daemons that
   * registered it, watched for failed reads ({@link ServiceFailures}); else embedded. No daemon
   * taking it leaves the shuffle embedded, and the log says why.
   */
  private <K, V, C> SluiceShuffleHandle<K, V, C> handle(
      int shuffleId, ShuffleDependency<K, V, C> dep, int maps, ShuffleKind kind) {
    Assignment first = toService(shuffleId, kind, dep, maps);
    if (first == null) {
      return new SluiceShuffleHandle<>(shuffleId, dep, maps, kind);
    }
    CurrentAssignment service = new CurrentAssignment(first);
    ServiceFailures.watch(
        dep.rdd().context(),
        Daemons.of(ServiceConf.of(conf)),
        shuffleId,
        dep.partitioner().numPartitions(),
        service);
    return new SluiceShuffleHandle<>(shuffleId, dep, maps, kind, service);
  }

  /** The shuffle's first assignment at the service's daemons, or null when it stays embedded. */
  private Assignment toService(
      int shuffleId, ShuffleKind kind, ShuffleDependency<?, ?, ?> dep, int maps) {
    ServiceConf service = ServiceConf.of(conf);
    if (service == null) {
      return null;
    }
    String settings = ServiceConf.sparkSettingsReason(conf);
    if (settings != null) {
      LOG.warn("Sluice: shuffle {} stays embedded: {}", shuffleId, settings);
      return null;
    }
    if (!SluiceShuffleHandle.serviceCovers(kind, dep)) {
      LOG.info(
          "Sluice: shuffle {} stays embedded: Spark's own aggregator or ordering reads it",
          shuffleId);
      return null;
    }
    if (maps > ServiceNative.MAX_MAPS_PER_READ) {
      LOG.info(
          "Sluice: shuffle {} stays embedded: {} map tasks, more than the {} one read of the"
              + " service's names",
          shuffleId,
          maps,
          ServiceNative.MAX_MAPS_PER_READ);
      return null;
    }
    Daemons daemons = Daemons.of(service);
    Assignment a;
    try {
      a = daemons.register(shuffleId, daemons.generation, dep.partitioner().numPartitions());
    } catch (IOException | RuntimeException e) {
      LOG.warn("Sluice: shuffle {} stays embedded: {}", shuffleId, e.getMessage());
      return null;
    }
    daemons.renewLeases();
    serviceShuffles.add(shuffleId);
    LOG.info(
        "Sluice: shuffle {} goes to the service's daemons {}", shuffleId, a.addresses(service));
    return a;
  }

  @Override
  public <K, V> ShuffleWriter<K, V> getWriter(
      ShuffleHandle handle, long mapId, TaskContext context, ShuffleWriteMetricsReporter metrics) {
    if (!(handle instanceof SluiceShuffleHandle)) {
      return super.getWriter(handle, mapId, context, metrics);
    }
    requireLibrary(handle);
    @SuppressWarnings("unchecked")
    SluiceShuffleHandle<K, V, ?> h = (SluiceShuffleHandle<K, V, ?>) handle;
    SluiceConf settings = new SluiceConf(SparkEnv.get().conf());
    openEngine(settings);
    int engineId = engineShuffle(h);
    mapIds.computeIfAbsent(h.shuffleId(), k -> ConcurrentHashMap.newKeySet()).add(mapId);
    if (h.kind() instanceof ShuffleKind.Operator) {
      return new SluiceOpWriter<>(
          h, engineId, mapId, context, metrics, settings, shuffleBlockResolver());
    }
    return new SluiceShuffleWriter<>(
        h, engineId, mapId, context, metrics, settings, shuffleBlockResolver());
  }

  @Override
  @SuppressWarnings({"unchecked", "rawtypes"})
  public <K, C> ShuffleReader<K, C> getReader(
      ShuffleHandle handle,
      int startMapIndex,
      int endMapIndex,
      int startPartition,
      int endPartition,
      TaskContext context,
      ShuffleReadMetricsReporter metrics) {
    if (!(handle instanceof SluiceShuffleHandle)) {
      return super.getReader(
          handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
    }
    requireLibrary(handle);
    SluiceShuffleHandle<K, ?, C> h = (SluiceShuffleHandle<K, ?, C>) handle;
    if (h.kind().nativeReduce()) {
      openEngine(new SluiceConf(SparkEnv.get().conf()));
      return new SluiceOpReader<>(
          h, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
    }
    if (RowShuffleReader.covers(h, SparkEnv.get().conf())) {
      // Spark SQL rows, pointed at in the decoded blocks rather than deserialized; a service
      // shuffle's from the daemons' streams.
      RowShuffleReader<K, C> rows =
          new RowShuffleReader<>(
              h,
              SparkEnv.get()
                  .mapOutputTracker()
                  .getMapSizesByExecutorId(
                      h.shuffleId(), startMapIndex, endMapIndex, startPartition, endPartition),
              context,
              metrics,
              // A service shuffle batches only the outputs kept on executors.
              SortShuffleManager.canUseBatchFetch(startPartition, endPartition, context));
      return h.service() ? rows.service(startPartition, endPartition) : rows;
    }
    if (h.service()) {
      return new ServiceReads<>(
          h, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
    }
    return SluiceSerializerManager.fetchReader(
        h, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics, null);
  }

  @Override
  public boolean unregisterShuffle(int shuffleId) {
    if (serviceShuffles.remove(shuffleId)) {
      // Registered by this (driver) process: the daemons delete the shuffle's data.
      ServiceFailures.forget(shuffleId);
      try {
        Daemons.of(ServiceConf.of(conf)).onEvery(ServiceNative.UNREGISTER, shuffleId, 0);
      } catch (IOException | RuntimeException e) {
        LOG.warn(
            "Sluice: unregistering shuffle {} at the daemons: {} (the lease deletes it)",
            shuffleId,
            e.getMessage());
      }
    }
    Integer engineId = engineIds.remove(shuffleId);
    if (engineId != null) {
      SluiceNative.unregisterShuffle(engineId);
    }
    Set<Long> ids = mapIds.remove(shuffleId);
    if (ids != null) {
      for (long mapId : ids) {
        shuffleBlockResolver().removeDataByMap(shuffleId, mapId);
      }
    }
    // Spark's own record of the shuffle's outputs here as well: those its writers wrote, and those
    // migrated to this executor from a decommissioned one (IndexShuffleBlockResolver adds their
    // map ids to it as they arrive), which Sluice's record does not hold.
    return super.unregisterShuffle(shuffleId);
  }

  @Override
  public void stop() {
    for (Integer engineId : engineIds.values()) {
      SluiceNative.unregisterShuffle(engineId);
    }
    engineIds.clear();
    ServiceConf service = serviceConf();
    if (service != null) {
      // The driver (which registered shuffles) ends the application at the daemons.
      ServiceFailures.stop();
      Daemons.of(service).close("driver".equals(executorId()));
    }
    super.stop();
  }

  /** The service's settings, or null in embedded mode or with settings that do not parse. */
  private ServiceConf serviceConf() {
    try {
      return ServiceConf.of(conf);
    } catch (IllegalArgumentException e) {
      return null;
    }
  }

  private static String executorId() {
    SparkEnv env = SparkEnv.get();
    return env == null ? null : env.executorId();
  }

  /** Why no shuffle of an application with these settings runs on Sluice, or null if they do. */
  public static String fallbackReason(SparkConf conf) {
    return Coverage.settingsReason(conf);
  }

  /** Whether this JVM has said how much native memory the engine holds outside Spark's view. */
  private static final java.util.concurrent.atomic.AtomicBoolean TOLD =
      new java.util.concurrent.atomic.AtomicBoolean();

  static void openEngine(SluiceConf s) {
    if (TOLD.compareAndSet(false, true)) {
      int tasks = concurrentTasks();
      long engine = SluiceNative.unaccountedBytes(s.bufferPoolBytes, s.memoryBudget, 0);
      long outside = SluiceNative.unaccountedBytes(s.bufferPoolBytes, s.memoryBudget, tasks);
      SparkEnv env = SparkEnv.get();
      boolean service =
          env != null && SluiceSetting.MODE.choice(env.conf()).equals("service");
      // In service mode each task's reads and pushes hold the client's buffers too.
      long client = service ? ServiceNative.taskBufferBytes() : 0;
      outside += tasks * client;
      LOG.warn(
          "Sluice: up to {} MiB of native memory outside Spark's memory manager: the engine's {}"
              + " MiB (spark.sluice.bufferPoolBytes {} MiB, free page pools, "
              + "spark.sluice.memoryBudget {} MiB) and {} MiB for each of {} concurrent reduce"
              + " tasks (state floor, merge read buffers, kept block buffers{}); leave that much"
              + " in spark.executor.memoryOverhead",
          outside >> 20,
          engine >> 20,
          s.bufferPoolBytes >> 20,
          s.memoryBudget >> 20,
          tasks == 0 ? 0 : ((outside - engine) / tasks) >> 20,
          tasks,
          service ? ", the service client's read and push buffers" : "");
    }
    SluiceNative.openEngine(
        new EngineSettings(
            s.offloadThreads,
            s.bufferPoolBytes,
            s.memoryBudget,
            s.operatorStateBytes,
            System.getProperty("java.io.tmpdir", "/tmp"),
            s.inlineWhenBusy ? concurrentTasks() : 0,
            s.pinOffloadThreads,
            s.segmentBytes,
            s.liquidOffload));
  }

  /** Tasks this executor runs at once: its cores over the cores a task takes. */
  private static int concurrentTasks() {
    SparkConf conf = SparkEnv.get().conf();
    int cores = conf.getInt("spark.executor.cores", Runtime.getRuntime().availableProcessors());
    return Math.max(1, cores / Math.max(1, conf.getInt("spark.task.cpus", 1)));
  }

  /** The engine's id for a shuffle, registering it on this process's first map task. */
  private int engineShuffle(SluiceShuffleHandle<?, ?, ?> h) {
    return engineIds.computeIfAbsent(
        h.shuffleId(),
        id -> {
          return SluiceNative.registerShuffle(
              h.dependency().partitioner().numPartitions(),
              h.numMaps(),
              h.engineOp());
        });
  }
}

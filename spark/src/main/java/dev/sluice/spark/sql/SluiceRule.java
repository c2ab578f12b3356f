package dev.sluice.spark.sql;

import dev.sluice.spark.SluiceShuffleManager;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.SparkPlan;
import scala.collection.immutable.Seq;

/**
 * A Sluice planner rule: inert unless the shuffle manager is Sluice, the engine can run the
 * rule's nodes here, and the rule's setting (read from the session's SQL conf, so a session can
 * change it between queries) is not false; then it rewrites the plan bottom-up, offering each
 * node, its children rewritten first, to {@link #replace}.
 */
abstract class SluiceRule extends Rule<SparkPlan> {
  /** The setting that turns the rule off. */
  abstract String setting();

  /** Why the engine cannot run the rule's nodes under {@code conf}, or null if it can. */
  abstract String fallbackReason(SparkConf conf);

  /** The node's native form, or the node itself. */
  abstract SparkPlan replace(SparkPlan node);

  @Override
  public final SparkPlan apply(SparkPlan plan) {
    SparkEnv env = SparkEnv.get();
    if (env == null
        || !(env.shuffleManager() instanceof SluiceShuffleManager)
        || !Boolean.parseBoolean(conf().getConfString(setting(), "true"))
        || fallbackReason(env.conf()) != null) {
      return plan;
    }
    return rewrite(plan);
  }

  private SparkPlan rewrite(SparkPlan plan) {
    List<SparkPlan> children = new ArrayList<>();
    boolean changed = false;
    scala.collection.Iterator<SparkPlan> it = plan.children().iterator();
    while (it.hasNext()) {
      SparkPlan c = it.next();
      SparkPlan n = rewrite(c);
      changed |= n != c;
      children.add(n);
    }
    return replace(changed ? plan.withNewChildren(toSeq(children)) : plan);
  }

  static <T> Seq<T> toSeq(List<T> list) {
    return scala.collection.immutable.List$.MODULE$.from(
        scala.jdk.javaapi.CollectionConverters.asScala(list));
  }
}
